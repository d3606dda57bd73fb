package decode

import (
	"errors"
	"strings"
	"testing"
)

// schemaReason reports whether a poison reason is now a schema change: a
// relation that lacks a mapped column or has it with a type its flag does
// not take stops the stream (ErrSchemaChanged) instead.
func schemaReason(err error) bool {
	return err != nil && (errors.Is(err, ErrMissingColumn) || errors.Is(err, ErrUnsupportedType))
}

// wantSchemaChanged feeds Begin and msgs to d and checks that the last
// message, and no earlier one, fails with ErrSchemaChanged and reason;
// it returns the error.
func wantSchemaChanged(t *testing.T, d *Decoder, reason error, msgs ...[]byte) error {
	t.Helper()
	all := append([][]byte{msgBegin(commitLSN, commitTime, xid)}, msgs...)
	for i, m := range all {
		_, err := d.Decode(m)
		if i < len(all)-1 {
			if err != nil {
				t.Fatalf("message %d (%q): %v", i, m[0], err)
			}
			continue
		}
		if !errors.Is(err, ErrSchemaChanged) || !errors.Is(err, reason) {
			t.Fatalf("Relation message: error %v, want one wrapping %v and %v", err, ErrSchemaChanged, reason)
		}
		return err
	}
	return nil
}

// TestSchemaChangeNamesTheFlag: the error of a relation that no longer
// matches the mapping says what changed and the flag to set.
func TestSchemaChangeNamesTheFlag(t *testing.T) {
	renamed := func(from, to string) []col {
		cols := outboxCols(pgJSONB)
		for i := range cols {
			if cols[i].name == from {
				cols[i].name = to
			}
		}
		return cols
	}
	for _, tc := range []struct {
		name   string
		cfg    Config
		cols   []col
		reason error
		want   []string
	}{
		{"key renamed", Config{}, renamed("aggregateid", "aggregate_id"), ErrMissingColumn,
			[]string{`column "aggregateid" (--key-column) was renamed to "aggregate_id": set --key-column aggregate_id`, "in transaction 771 (commit at 16/B374D848)"}},
		{"topic column renamed", Config{}, renamed("aggregatetype", "aggregate_type"), ErrMissingColumn,
			[]string{`set --topic 'outbox.event.${aggregate_type}'`}},
		{"header column renamed", Config{HeaderColumns: []HeaderColumn{{"type", "eventType"}}}, renamed("type", "event_type"), ErrMissingColumn,
			[]string{`set --header-columns event_type:eventType`}},
		{"id renamed, custom id column", Config{IDColumn: "id"}, renamed("id", "event_id"), ErrMissingColumn,
			[]string{`set --id-column event_id`}},
		{"payload dropped", Config{}, outboxCols(pgJSONB)[:4], ErrMissingColumn,
			[]string{`has no column "payload" (--payload-column) any more (dropped or renamed); its columns are id, aggregatetype, aggregateid, type`, `ADD COLUMN "payload"`}},
		{"payload retyped", Config{}, outboxCols(pgInt4), ErrUnsupportedType,
			[]string{`column "payload" (--payload-column) has type integer`, `ALTER COLUMN "payload" TYPE jsonb`}},
		{"key retyped to a type created since start", Config{}, func() []col { c := outboxCols(pgJSONB); c[2].oid = 70000; return c }(), ErrUnsupportedType,
			[]string{`column "aggregateid" (--key-column) has type public.order_key (oid 70000)`, "start walrelay again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, tc.cfg)
			typeMsg := newFrame('Y').u32(70000).str("public").str("order_key").b
			err := wantSchemaChanged(t, d, tc.reason, outboxRelation(pgJSONB), outboxRow(eventUUID, "order", "o-1", "T", text("{}")), typeMsg,
				msgRelation(outboxRelID, "public", "outbox", tc.cols...))
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestSchemaChangeLeafPartition: a leaf partition of an outbox that lacks
// a mapped column stops the stream too, once resolved.
func TestSchemaChangeLeafPartition(t *testing.T) {
	d := newDecoder(t, Config{ResolvePartitionRoots: true})
	mustFeed(t, d, msgBegin(commitLSN, commitTime, xid), msgRelation(leafRelID, "public", "outbox_2027", outboxCols(pgJSONB)[:4]...))
	err := d.Resolve(leafRelID, "public.outbox", true)
	if !errors.Is(err, ErrSchemaChanged) || !errors.Is(err, ErrMissingColumn) {
		t.Fatalf("Resolve: %v, want ErrSchemaChanged", err)
	}
}
