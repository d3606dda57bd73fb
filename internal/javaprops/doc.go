// Package javaprops reads what java.util.Properties writes: the one
// unescaping of a key or value that import-debezium's connector files and
// the trace contexts Debezium's outbox extension writes share.
//
// Input: a key or value as it stands in a .properties text. Output: the
// string java.util.Properties.load makes of it, or an error for a \u
// without four hex digits. Pure: no I/O, no state.
package javaprops
