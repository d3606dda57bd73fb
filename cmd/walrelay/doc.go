// Command walrelay streams committed outbox inserts from a PostgreSQL
// logical replication slot to Kafka.
//
// Input: flags and their WALRELAY_* environment variables. Output: the
// sub-command's work (run: the pipeline package's relay; check, status,
// setup, health: one report each) and an exit code:
//
//	0  clean: a graceful stop, or the command succeeded
//	1  runtime failure: the relay stopped on an error retrying would not
//	   cure by itself, or a server could not be reached
//	2  configuration or environment: bad flags, or a PostgreSQL/Kafka setup
//	   a person must fix (the message says how)
//	3  slot lost: PostgreSQL invalidated the slot, or a slot walrelay streamed
//	   from is gone (dropped, or a failover without a synchronized failover
//	   slot): events may have been lost
//
// Invariant: main holds no business logic: it parses the configuration,
// builds the logger, the metrics and the relay, runs it, and maps its error
// to an exit code. The settings and their flags are pipeline.Settings's,
// check's checks pipeline.Check's, setup's and status's SQL pgcatalog's,
// the flag kit internal/cli, the HTTP server and probe internal/httpserve,
// import-debezium's translation debezium's; main only wires them.
package main
