// Package outbox holds the one outbox table DDL that the tests, the
// benchmarks, the compatibility check and the demo create: DESIGN.md's
// table, column for column Debezium's (id, aggregatetype, aggregateid,
// type, payload). Input: none. Output: TableDDL. Invariant: every copy of the
// outbox table in this repository is TableDDL; deploy/compose/init.sql, which
// is SQL, is compared with it by test/compose.
//
// It imports nothing, so that binaries (bench, compat, demo) can use it
// without the testing package that test/harness brings.
package outbox

// TableDDL creates the outbox table public.outbox (in the search path's
// first schema).
const TableDDL = `
CREATE TABLE outbox (
  id            uuid PRIMARY KEY,
  aggregatetype text NOT NULL,
  aggregateid   text NOT NULL,
  type          text NOT NULL,
  payload       jsonb
);`
