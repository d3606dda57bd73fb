// Package connect writes what Kafka Connect's converters write for the
// Outbox Event Router (Debezium 3.6.1 on Kafka Connect 4.3.1): the record
// formats, JSON strings as Jackson escapes them, RegexRouter topics, the
// envelope's struct schema and the schema JsonSchemaData infers for an
// expanded JSON payload.
//
// Input: column text and schemas already mapped by the caller.
// Output: the bytes of keys, values and schemas, byte for byte Connect's.
// Invariant: pure and database-agnostic: no I/O, no PostgreSQL or pgoutput.
package connect
