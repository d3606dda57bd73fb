// Package inboxkill proves package inbox end to end: walrelay relays a
// workload of the demo's events (test/cmd/demo) while the example consumer
// (examples/inbox, a separate process) and walrelay are killed with
// SIGKILL again and again, one customer's orders failing for the whole run
// (dead-lettered, replayed with inbox.Redrive at the end); then the
// projection is checked against the outbox table. TestRestartTimes reports
// the time from a member's SIGKILL to its partitions handled again.
//
// Input: the test bed, the walrelay binary and the examples/inbox binary.
// Output: a report of events, kills, the duplicates Kafka delivered to the
// consumer (counted on its conflict path) and in the topics, and the
// effects applied twice, missing or out of order.
// Invariant: the truth comes from outside the consumer — the committed
// outbox rows and the records read back from Kafka; the short run is part
// of go test, the long one needs WALRELAY_CHAOS=1 (make inbox-chaos).
package inboxkill
