// Package outbox holds the one outbox table DDL that the tests, the
// benchmarks, the compatibility check and the demo create: DESIGN.md's
// table, column for column Debezium's (id, aggregatetype, aggregateid,
// type, payload). Input: none. Output: TableDDL, its Columns (for
// partitioned outboxes) and Table (another name or payload type).
// Invariant: every copy of the outbox table in this repository comes from
// here; deploy/compose/init.sql, which is SQL, is compared with it by
// test/compose.
//
// It imports nothing, so that binaries (bench, compat, demo) can use it
// without the testing package that test/harness brings.
package outbox
