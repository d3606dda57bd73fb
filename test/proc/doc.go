// Package proc is the one process runner of the tests and the benchmarks:
// it starts walrelay under a test (test/harness), the test bed's PostgreSQL
// and Kafka servers (test/testbed), and the benchmark's relays and Kafka
// Connect (bench/internal/rig).
//
// Input: a command, its environment, working directory and log file, and
// how it relates to its starter (detached, own process group, death
// signal). Output: a running process to wait for, signal, kill, read the
// exit code and log tail of, and, when asked, its peak RSS and CPU time
// (stat.go, read from /proc; 0 or -1 when a figure cannot be read, never a
// failure); for a process another one started, checks by pid.
// Invariant: every wait is bounded, and a process that is not detached dies
// with its starter (the death signal), so a killed test binary leaves no
// child behind.
package proc
