// Command inboxbench is the consumer of bench's inbox workload
// (bench/cmd/bench/inbox.go): a package inbox consumer whose Handler
// inserts one row per record into inbox_bench_effects and then waits
// --delay (a handler's own work), and whose OnDuplicate counts the
// redelivered records in inbox_bench_duplicates. It uses only the API
// package inbox has had since before partitions were handled in parallel,
// so that bench builds it from an older commit too (-inbox-before).
//
//	inboxbench --pg-url postgres://... --brokers localhost:9092 --group g --topics t --delay 2ms
//
// Input: the records of --topics (an "id" header each). Output: one row
// per id in inbox_bench_effects (grp, id, key, seq) and the inbox table,
// the duplicates absorbed per group in inbox_bench_duplicates. Invariant:
// each id's row is committed once per group.
//
// Exit codes: 0 after SIGINT/SIGTERM, 1 on a runtime failure, 2 on bad flags
// or a database it cannot set up.
//
// With INBOXBENCH_PROFILE=dir it writes the consumer's CPU, block and mutex
// profiles and a breakdown of a record's time (profile.go) to dir at exit.
package main
