// Package fault proves walrelay's delivery rules under faults, the way
// Jepsen checks Kafka: writers commit outbox transactions continuously while
// the real walrelay binary is killed, stopped, cut off from PostgreSQL or
// Kafka, slowed down or doubled, and PostgreSQL and Kafka are restarted.
// Then everything is read back and judged by harness.Check.
//
// Input: the test bed's PostgreSQL and Kafka and a walrelay binary built once
// (or named by WALRELAY_TEST_BIN). Output: one RESULT line per scenario with
// events written, faults injected, lost, phantom, order violations and
// duplicates. Invariant: every scenario ends with lost = 0, phantom = 0,
// order violations = 0, and duplicates only of events a fault struck before
// they were confirmed.
//
// The *Messages variants run a scenario against the message source
// (--source messages, or tables and messages mixed in one transaction): the
// workload emits its events as logical decoding messages, each recorded in a
// ledger table that walrelay never reads, the truth the checker reads.
//
// A scenario that stops or restarts a server, or changes a server-wide
// setting, calls testbed.Disrupt and runs alone on the bed; the others call
// t.Parallel and run beside each other and other packages' tests (the
// tracing scenarios set walrelay's environment with t.Setenv and run
// sequentially). Every scenario's slot, publication, topics and proxies are
// its own.
//
// `make test` runs the short version of each scenario but the TestCluster
// ones, which run on a three-broker Kafka cluster (testbed.GetCluster) under
// `make cluster`, and TestKafkaDownMessages and TestFleetGroupFaults (twelve
// databases on three fleet replicas); WALRELAY_CHAOS=1 (`make chaos`) runs the
// long version of all.
package fault
