// Package decode turns pgoutput (protocol version 1) messages into outbox
// events grouped by transaction.
//
// Input: the WAL data of each XLogData message, in stream order.
// Output: Tx values in commit order; a transaction larger than
// Config.MaxPartBytes is handed on in several parts, the last one carrying
// its end LSN.
// Invariant: every event of a transaction is emitted before its last part,
// in stream order, and nothing is emitted but for an insert into an outbox
// table (or a partition of one, as the caller resolves it: with
// Config.ResolvePartitions no change of another relation is decoded before
// Resolve) and, with Config.Messages, a transactional logical decoding
// message of Config.MessagePrefix (never a non-transactional one); an event
// owns its bytes, so a message is garbage once decoded.
// The package does no I/O and keeps no connection.
package decode
