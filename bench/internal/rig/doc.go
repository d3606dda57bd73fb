// Package rig is the benchmark's and the compatibility check's equipment:
// the test bed's servers read from the environment, processes sampled for
// peak RSS and CPU time, the walrelay binary, pg_recvlogical, a Kafka
// Connect worker running Debezium, slots and publications, and Kafka topics.
// Input: the environment `go run ./test/cmd/testbed -- CMD` exports.
// Output: started processes and their measurements.
// Invariant: every wait is bounded in time, every address is loopback, and
// every process started is stopped by its Stop (or killed) before return.
package rig
