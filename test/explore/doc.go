// Package explore searches walrelay's configuration space: each case draws
// an outbox shape, a transaction mix, topic settings, relay flags, a poison
// policy, a fault, a database encoding, a setting on walrelay's role,
// domain/enum/citext columns, a key column renamed while streaming and
// topic timestamp bounds from the space declared in space_test.go, runs the
// real walrelay binary through it end to end and judges the outcome with
// harness.Check. Expected values are what the database holds, read back
// through a UTF-8 session.
//
// Input: the test bed's PostgreSQL and Kafka, a walrelay binary (built once,
// or WALRELAY_TEST_BIN), and a seed per case: WALRELAY_EXPLORE_SEED=N runs
// exactly case N, EXPLORE_CASES=N runs N cases from a random base (or
// WALRELAY_EXPLORE_BASE; WALRELAY_EXPLORE_WHERE=dim=value,... keeps only
// the draws in that region), the default a fixed handful (`make test`);
// `make explore` runs many. Output: per case its seed, a one-line description and
// a RESULT line (lost, phantom, order violations, duplicates, wrong values or
// headers, dead-letter mismatches, peak RSS against --max-inflight-bytes),
// and a coverage table of how many cases drew each value of each dimension.
// Invariant: in every case nothing committed is lost, nothing rolled back
// (whole or to a savepoint) is published, each key keeps commit order,
// duplicates only follow faults, each record carries the committed value and
// headers, poison rows are exactly the dead-letter topic (or halt the relay
// without confirming past them), resident memory stays within the in-flight
// bound (see memoryBoundMiB), every record holds the row's characters in
// UTF-8 whatever the database's or the role's encoding, events older than a
// topic's timestamp bound reach their topic, a configuration walrelay does
// not support is refused at start with exit code 2 and the fix, and a
// mapped column renamed while streaming stops walrelay with exit 2 naming
// the flag, before it confirms or dead-letters any row after it.
package explore
