// Package harness holds what the fault-injection suite (and, in time, the
// end-to-end suite) needs: the walrelay binary run as a separate process, a
// test database with the outbox table, a workload of concurrent writers, a
// witness of commit positions, a TCP proxy that cuts, delays and throttles
// connections, and the invariant checker.
//
// Input: the test bed (test/testbed) and a walrelay binary. Output: the
// committed outbox rows, every record read back from Kafka, and a Report of
// lost, phantom, out-of-order and duplicated events.
// Invariant: the checker judges from what PostgreSQL and Kafka hold, never
// from what walrelay says about itself.
package harness
