// Package decode turns pgoutput (protocol version 1) messages into outbox
// events grouped by transaction; the record formats come from decode/connect.
//
// Input: the WAL data of each XLogData message, in stream order.
// Output: one Tx of Events per commit, in commit order (a transaction
// larger than Config.MaxPartBytes in several parts, the last carrying its
// end LSN); an event that cannot become a record carries Err and Reason;
// an outbox that no longer matches the mapping is an error wrapping
// ErrSchemaChanged (never events). Types not built in are read as
// Config.Types resolves them.
// Invariant: only inserts into an outbox (or into a leaf partition of one:
// with Config.ResolvePartitionRoots, no change of another relation is decoded
// before Resolve says what it is) and, with Config.Messages, transactional
// messages of Config.MessagePrefix become events, in stream order, each
// owning its bytes; no I/O, no log per row.
package decode
