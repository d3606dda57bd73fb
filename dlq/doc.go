// Package dlq is `walrelay dlq`: the operator's view of the dead-letter
// topic and of the aggregates parked on the state topic
// (--on-poison=park), and the commands that put a parked aggregate back in
// order: list, show, redrive, discard.
//
// Input: the dead-letter topic (read_committed, to its last stable
// offsets) and the state topic's park, release and answer records
// (kafkastate). Output: text on stdout; for redrive, the parked events
// re-published to their original topics and partitions, and a release
// record; for discard, a release record alone.
//
// Invariant: an aggregate's events reach its topic in commit order with
// no gap. Redrive re-publishes every parked event of the aggregate after
// its last release and up to the newest position the relay recorded
// (the park record's Through), in position order, each once per run, and
// only then writes the release record naming that position; a run killed
// midway, or run twice, re-publishes a prefix again: duplicates, never a
// reordering or a gap.
//
// The protocol with the live relay, on the state topic (one writer per
// key):
//
//  1. The relay writes park/<aggregate> for each event it parks, through
//     its position, acknowledged before the slot is confirmed past it.
//  2. Redrive reads park/ and release/<aggregate>, waits until the
//     dead-letter topic holds the event at park's Through, re-publishes
//     the events after release's Through up to park's, flushes (with
//     --exactly-once: inside one Kafka transaction with the release
//     record), then writes release/<aggregate> through park's Through.
//  3. The relay follows the state topic. A release through the newest
//     event it parked un-parks the aggregate: its next events go to their
//     topic, after the re-published ones. One that ends earlier (the
//     relay parked more meanwhile) leaves it parked. Either way the relay
//     answers with parkack/<aggregate>, which redrive waits for; if it
//     says still parked, redrive goes on from its release (step 2).
//  4. A relay that starts reads all three: parked iff park's Through is
//     after release's, so a release written while no relay ran counts.
//
// Dead letters of no parked aggregate (redrive --offset, --reason,
// --original-topic) are re-published in commit order and then recorded
// on the state topic as redriven/<dead-letter topic>/<partition>/<offset>
// (kafkastate.Redriven), which a later redrive leaves out: at-least-once
// without --exactly-once, within one Kafka transaction with it.
package dlq
