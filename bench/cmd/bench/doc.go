// Command bench measures walrelay side by side with the slot's ceiling
// (pg_recvlogical with pgoutput, and walrelay's bench-only null sink) and
// with Debezium (Kafka Connect standalone, PostgreSQL connector, Outbox Event
// Router), in one run on the same PostgreSQL and Kafka:
//
//	make bench            # = go run ./test/cmd/testbed -- bin/bench
//
// W1 drains a backlog committed while every relay is stopped: single-row
// transactions, then large transactions. W2 writes at fixed rates and an
// independent franz-go consumer measures commit-to-consumer latency. Raw
// figures go to bench/results/DATE-HOST.json, a markdown table to stdout
// and next to the JSON. Sizes come from flags or BENCH_* variables; the
// issue's targets are reported as figures, never asserted.
//
// Input: the test bed's servers (rig.FromEnv: loopback only), flags or
// BENCH_* variables. Output: the JSON and markdown report, exit 0; 1 when a
// run failed, 2 for bad flags or no bed. Invariant: every relay drains the
// same backlog on the same servers, and a figure is measured, never assumed.
package main
