// Package e2e proves walrelay's guarantees end to end: the real walrelay
// binary between the test bed's real PostgreSQL and real Kafka, with a real
// consumer reading every record back. The tests of what happens on the
// Kafka side are in kafkaside, those with a primary and standby of their
// own in failover; all three share package e2etest.
//
// Tests that stop or restart the servers, or that measure the slot's lag,
// call testbed.Disrupt and do not run in parallel; the others do.
package e2e
