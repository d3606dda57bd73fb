// Package recovery publishes outbox rows from the table itself when the
// slot cannot supply them: `walrelay recover` after the slot walrelay
// streamed from is gone (a failover without a synchronized slot), and
// `run --backfill` for the rows committed before walrelay's slot existed.
//
// Input: the relay's settings and the slot's marker on the state topic.
// Output: a new slot, created exporting its snapshot; the rows that snapshot
// shows, chosen by a timestamp column or commit time, published through the
// decoder and the sink as the stream's records are (plus the header
// walrelay.recovered), acknowledged by Kafka; the marker at the slot's
// consistent point; an Account of what was and was not recovered.
//
// Invariant: rows committed before the consistent point come from the
// table, rows after it from the slot, so nothing committed is skipped;
// until every recovered row is acknowledged the marker says the recovery
// is unfinished, nothing streams from the slot, and a new recovery drops
// it and starts again. Duplicates are allowed, gaps are not.
package recovery
