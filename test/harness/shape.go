package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Shape is an outbox table layout beyond OutboxDDL's: partitioning, the
// types of the id, key and payload columns, and a wide unmapped column.
// Every table of a shape has the same columns:
//
//	id <IDType>, aggregatetype text, aggregateid <KeyType> (NULL only in
//	poison rows), type text, payload <PayloadType>, seq bigint, part int,
//	extra <ExtraType>
//
// seq is the row's per-aggregate sequence (as in Workload's payload), so the
// checker's commit order per key does not depend on the payload type; part
// is the partition key of range and list partitioning. The database also has
// OutboxDDL's orders and agg_seq tables and a deleted_log table that keeps
// what rows deleted in their own transaction were (see ShapeWorkload.Delete).
type Shape struct {
	Tables []string // table names in schema public; default outbox_a
	// Partitioning is "" (a plain table), "range" or "list" (on part) or
	// "hash" (on id).
	Partitioning string
	// AttachLater leaves part values 4 and 5 without a partition until
	// Attach adds one (range and list only).
	AttachLater bool
	IDType      string // uuid, text or bigint
	KeyType     string // text, uuid or bigint
	// PayloadType is jsonb, json, text or bytea; "null" is a jsonb column
	// that is always NULL.
	PayloadType string
	// ExtraType is the unmapped column's type: "" (none), text, jsonb or
	// bytea; ExtraBytes is its width in each row (random hex digits, or
	// half as many bytes for bytea, so PostgreSQL cannot compress it and
	// TOASTs it out of line past about 2 kB).
	ExtraType  string
	ExtraBytes int
	// Note is the non-ASCII text of every payload (default
	// `ünïcødé ✓ "quoted"`): one the database's encoding holds.
	Note string
}

func (s Shape) withDefaults() Shape {
	if len(s.Tables) == 0 {
		s.Tables = []string{"outbox_a"}
	}
	if s.IDType == "" {
		s.IDType = "uuid"
	}
	if s.KeyType == "" {
		s.KeyType = "text"
	}
	if s.PayloadType == "" {
		s.PayloadType = "jsonb"
	}
	if s.Note == "" {
		s.Note = `ünïcødé ✓ "quoted"`
	}
	return s
}

// QualifiedTables is the --table value: the tables, schema-qualified.
func (s Shape) QualifiedTables() string {
	s = s.withDefaults()
	q := make([]string, len(s.Tables))
	for i, t := range s.Tables {
		q[i] = "public." + t
	}
	return strings.Join(q, ",")
}

func (s Shape) payloadColumnType() string {
	if s.PayloadType == "null" {
		return "jsonb"
	}
	return s.PayloadType
}

// DDL creates the shape's tables (and their partitions, but not the one
// Attach adds) and deleted_log.
func (s Shape) DDL() string {
	s = s.withDefaults()
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS deleted_log (id text PRIMARY KEY, aggregateid text NOT NULL, seq bigint NOT NULL, payload text);\n")
	for _, t := range s.Tables {
		fmt.Fprintf(&b, "CREATE TABLE %s (\n  id %s NOT NULL,\n  aggregatetype text NOT NULL,\n  aggregateid %s,\n  type text NOT NULL,\n  payload %s,\n  seq bigint NOT NULL,\n  part int NOT NULL",
			t, s.IDType, s.KeyType, s.payloadColumnType())
		if s.ExtraType != "" {
			fmt.Fprintf(&b, ",\n  extra %s", s.ExtraType)
		}
		switch s.Partitioning {
		case "":
			b.WriteString(",\n  PRIMARY KEY (id)\n);\n")
		case "range":
			fmt.Fprintf(&b, ",\n  PRIMARY KEY (id, part)\n) PARTITION BY RANGE (part);\n"+
				"CREATE TABLE %[1]s_p0 PARTITION OF %[1]s FOR VALUES FROM (0) TO (2);\n"+
				"CREATE TABLE %[1]s_p1 PARTITION OF %[1]s FOR VALUES FROM (2) TO (4);\n", t)
			if !s.AttachLater {
				fmt.Fprintf(&b, "CREATE TABLE %[1]s_p2 PARTITION OF %[1]s FOR VALUES FROM (4) TO (6);\n", t)
			}
		case "list":
			fmt.Fprintf(&b, ",\n  PRIMARY KEY (id, part)\n) PARTITION BY LIST (part);\n"+
				"CREATE TABLE %[1]s_p0 PARTITION OF %[1]s FOR VALUES IN (0, 2);\n"+
				"CREATE TABLE %[1]s_p1 PARTITION OF %[1]s FOR VALUES IN (1, 3);\n", t)
			if !s.AttachLater {
				fmt.Fprintf(&b, "CREATE TABLE %[1]s_p2 PARTITION OF %[1]s FOR VALUES IN (4, 5);\n", t)
			}
		case "hash":
			fmt.Fprintf(&b, ",\n  PRIMARY KEY (id, part)\n) PARTITION BY HASH (id);\n"+
				"CREATE TABLE %[1]s_p0 PARTITION OF %[1]s FOR VALUES WITH (MODULUS 3, REMAINDER 0);\n"+
				"CREATE TABLE %[1]s_p1 PARTITION OF %[1]s FOR VALUES WITH (MODULUS 3, REMAINDER 1);\n"+
				"CREATE TABLE %[1]s_p2 PARTITION OF %[1]s FOR VALUES WITH (MODULUS 3, REMAINDER 2);\n", t)
		}
	}
	return b.String()
}

// attachDDL creates the partition for part values 4 and 5 as a table of its
// own and attaches it, the way an operator adds a partition.
func (s Shape) attachDDL() string {
	s = s.withDefaults()
	var b strings.Builder
	for _, t := range s.Tables {
		bound := "FROM (4) TO (6)"
		if s.Partitioning == "list" {
			bound = "IN (4, 5)"
		}
		fmt.Fprintf(&b, "CREATE TABLE %[1]s_p2 (LIKE %[1]s INCLUDING DEFAULTS INCLUDING CONSTRAINTS);\n"+
			"ALTER TABLE %[1]s ATTACH PARTITION %[1]s_p2 FOR VALUES %[2]s;\n", t, bound)
	}
	return b.String()
}

// KeyOf is the text of aggregate k's key in a column of type keyType, as
// PostgreSQL renders it (the record key walrelay sends).
func KeyOf(keyType string, k int) string {
	switch keyType {
	case "uuid":
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", k)
	case "bigint":
		return strconv.Itoa(1000 + k)
	}
	return "agg-" + strconv.Itoa(k)
}

// render is the SQL expression of column col as the checker compares it
// with a record's value: bytea as hex, everything else as text.
func (s Shape) render(col string) string {
	if s.payloadColumnType() == "bytea" {
		return "encode(" + col + ", 'hex')"
	}
	return col + "::text"
}

// ShapeRow is a committed row of a shape's tables (or of deleted_log).
type ShapeRow struct {
	ID    string
	Key   string // "" in a poison row (NULL key)
	Seq   int64
	Xid   uint32 // the inserting transaction (xmin)
	Value *string
	// Table is where it was read: a table of the shape, or deleted_log.
	Table  string
	Poison bool
}

// ShapeRows reads every committed row of the shape's tables and of
// deleted_log (rows their own transaction deleted), by id.
func (e *Env) ShapeRows(t testing.TB, s Shape) map[string]ShapeRow {
	t.Helper()
	s = s.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var parts []string
	for _, tb := range s.Tables {
		parts = append(parts, fmt.Sprintf("SELECT id::text, aggregateid::text, seq, xmin::text, %s, %s FROM %s",
			s.render("payload"), quoteLiteral(tb), tb))
	}
	parts = append(parts, "SELECT id, aggregateid, seq, xmin::text, payload, 'deleted_log' FROM deleted_log")
	rows, err := conn.Query(ctx, strings.Join(parts, " UNION ALL "))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ShapeRow{}
	for rows.Next() {
		var r ShapeRow
		var key *string
		var xmin string
		if err := rows.Scan(&r.ID, &key, &r.Seq, &xmin, &r.Value, &r.Table); err != nil {
			t.Fatal(err)
		}
		if key == nil {
			r.Poison = true
		} else {
			r.Key = *key
		}
		x, err := strconv.ParseUint(xmin, 10, 32)
		if err != nil {
			t.Fatalf("xmin %q: %v", xmin, err)
		}
		r.Xid = uint32(x)
		if _, dup := out[r.ID]; dup {
			t.Fatalf("id %s committed twice (in %s and %s)", r.ID, out[r.ID].Table, r.Table)
		}
		out[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
