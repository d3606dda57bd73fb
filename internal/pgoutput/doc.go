// Package pgoutput parses the messages of PostgreSQL's pgoutput logical
// decoding plugin, protocol version 1, and follows a stream's transaction
// boundaries. It is walrelay's one parser of these bytes: decode maps rows
// with it, and replication decides with TxState when a keepalive's WAL end
// may be confirmed.
//
// Input: the WAL data of one XLogData message at a time. Output: one value
// per message kind (Begin, Commit, Relation, Insert, Update, Delete,
// Truncate, Type, Origin, LogicalMessage), chosen by the first byte as in
// pglogrepl's message.go; TxState's InTx and LastEnd.
// Invariant: every field is read with a bounds check (a short message is an
// error wrapping ErrTruncated, never a panic); tuple values alias the
// message, nothing else does; TxState changes only on a well-formed Begin
// or Commit in protocol order.
//
// N.B. it sits below both replication and decode (DESIGN.md: a package may
// import the one upstream of it, never one downstream): replication cannot
// import decode, and the decision that guards the confirmed LSN must rest
// on the same tested, fuzzed code that decodes the rows.
package pgoutput
