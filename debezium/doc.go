// Package debezium translates a Debezium PostgreSQL connector with the
// Outbox Event Router into walrelay's settings (`walrelay import-debezium`).
//
// Input: the connector configuration's bytes (Kafka Connect's REST JSON, a
// flat JSON object or a .properties file), as the caller read them. Output:
// walrelay flags and values, notes, and every option walrelay does not
// support. Invariant: pure (no I/O), and a secret (a password, a key) is
// never echoed, in a setting, a note or an unsupported option.
package debezium
