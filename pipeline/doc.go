// Package pipeline runs the stages together: replication → decode → sink,
// with the checkpoint tracker between the sink's acknowledgements and the
// replication stage's status updates, and a watch loop beside them.
//
// Input: the stages' configurations (or Settings, the user's flags, which
// Config turns into them; Check runs `walrelay check`'s preflight). Output: every committed outbox insert
// as a Kafka record, the slot confirmed behind Kafka's acknowledgements,
// and the relay's health, readiness and gauges.
// Invariant (the restart rule): any stage error ends the attempt, the Kafka
// client is discarded with whatever it still holds, and the next attempt
// restarts from the slot's confirmed position with a new stream, decoder,
// sink and tracker; only a permanent error (setup, slot lost, a poison
// event with --on-poison halt) ends Run. A login PostgreSQL or Kafka
// refuses (RefusalHint) is a setup error until an attempt has streamed,
// and retried after; an ACL or a codec Kafka refuses (RefusedAlways) is one
// always. The pipeline runs no SQL of its own: the catalog
// queries (Prepare, the publication verifier, the slot status, the column
// checks, partition roots) are package pgcatalog's.
package pipeline
