package outbox

// head is the outbox table's columns before payload.
const head = `id uuid NOT NULL, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL`

// Columns are the outbox table's columns without its key, for a
// partitioned outbox, whose key must hold the partition key too.
const Columns = head + `, payload jsonb`

// TableDDL creates the outbox table public.outbox (in the search path's
// first schema).
const TableDDL = `
CREATE TABLE outbox (` + Columns + `, PRIMARY KEY (id));`

// Table is TableDDL for a table called name whose payload column has type
// payload (json, jsonb, bytea), with extra columns (SQL column definitions)
// after it.
func Table(name, payload string, extra ...string) string {
	s := `CREATE TABLE ` + name + ` (` + head + `, payload ` + payload
	for _, c := range extra {
		s += `, ` + c
	}
	return s + `, PRIMARY KEY (id));`
}
