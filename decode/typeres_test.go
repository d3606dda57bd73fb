package decode

import (
	"errors"
	"testing"
)

// Type OIDs of a database's own types, as the check at start resolves them
// (pgcatalog.ResolveTypes): a domain over a domain over uuid, an enum, a
// citext, a domain over bigint, a domain over jsonb.
const (
	oidEventID   = 70001 // CREATE DOMAIN event_id AS event_uuid (AS uuid)
	oidAggKind   = 70002 // CREATE TYPE aggregate_kind AS ENUM ('order', 'customer')
	oidCitext    = 70003
	oidSeq       = 70004 // CREATE DOMAIN seq AS bigint
	oidDocDomain = 70005 // CREATE DOMAIN doc AS jsonb
)

var testTypes = Types{
	oidEventID:   {OID: pgUUID, Name: "event_id"},
	oidAggKind:   {OID: pgText, Name: "aggregate_kind", Enum: true, Labels: []string{"order", "customer"}},
	oidCitext:    {OID: pgText, Name: "citext"},
	oidSeq:       {OID: pgInt8, Name: "seq"},
	oidDocDomain: {OID: pgJSONB, Name: "doc"},
}

// typedCols is the outbox with a domain id, an enum aggregate type, a
// citext key and the payload of type payload.
func typedCols(key, payload uint32) []col {
	return []col{
		{name: "id", oid: oidEventID, key: true},
		{name: "aggregatetype", oid: oidAggKind},
		{name: "aggregateid", oid: key},
		{name: "type", oid: pgText},
		{name: "payload", oid: payload},
	}
}

// TestResolvedTypes: columns of domains, enums and citext are read as what
// Config.Types resolves them to: the id, key and topic as PostgreSQL's
// text, the json formats as the base type (an enum as Debezium's
// io.debezium.data.Enum).
func TestResolvedTypes(t *testing.T) {
	row := []val{text(eventUUID), text("order"), text("Order-Ä1"), text("Created"), text(`{"n":1}`)}
	for _, tc := range []struct {
		name               string
		cfg                Config
		cols               []col
		row                []val
		wantKey, wantValue string
	}{
		{"string formats", Config{}, typedCols(oidCitext, oidDocDomain), row, "Order-Ä1", `{"n":1}`},
		{"json-schema: citext key is a string, domain over jsonb payload is Json",
			Config{KeyFormat: FormatJSONSchema, ValueFormat: FormatJSONSchema},
			typedCols(oidCitext, oidDocDomain), row,
			`{"schema":{"type":"string","optional":false},"payload":"Order-Ä1"}`,
			`{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1},"payload":"{\"n\":1}"}`},
		{"json-schema: domain over bigint key is int64",
			Config{KeyFormat: FormatJSONSchema},
			typedCols(oidSeq, pgJSONB), []val{text(eventUUID), text("order"), text("42"), text("Created"), text(`{}`)},
			`{"schema":{"type":"int64","optional":false},"payload":42}`, `{}`},
		{"json-schema: enum key is io.debezium.data.Enum with its labels",
			Config{KeyFormat: FormatJSONSchema, Topic: "events"},
			typedCols(oidAggKind, pgJSONB), []val{text(eventUUID), text("order"), text("customer"), text("Created"), text(`{}`)},
			`{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"order,customer"}},"payload":"customer"}`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Types = testTypes
			d := newDecoder(t, tc.cfg)
			tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", tc.cols...), msgInsert(outboxRelID, tc.row...))
			ev := tx.Events[0]
			if ev.Err != nil {
				t.Fatalf("poison event: %v", ev.Err)
			}
			if string(ev.Key) != tc.wantKey || string(ev.Value) != tc.wantValue || string(ev.ID) != eventUUID {
				t.Errorf("event %s; want key %s value %s", fmtEvent(ev), tc.wantKey, tc.wantValue)
			}
			if tc.cfg.Topic == "" && ev.Topic != "outbox.event.order" {
				t.Errorf("topic %q, want the enum's label: outbox.event.order", ev.Topic)
			}
		})
	}
}

// TestUnresolvedTypeRefused: a mapped column of a type the check at start
// did not resolve (created since) stops the stream; with the resolution it
// is read as its base type.
func TestUnresolvedTypeRefused(t *testing.T) {
	d := newDecoder(t, Config{})
	wantSchemaChanged(t, d, ErrUnsupportedType, msgRelation(outboxRelID, "public", "outbox", typedCols(oidCitext, pgJSONB)...))
	// A domain over a type no flag takes stays refused once resolved.
	d = newDecoder(t, Config{Types: Types{oidDocDomain: {OID: pgJSONB, Name: "doc"}}})
	cols := outboxCols(pgJSONB)
	cols[2].oid = oidDocDomain
	wantSchemaChanged(t, d, ErrUnsupportedType, msgRelation(outboxRelID, "public", "outbox", cols...))
}

// TestUnmappableBeforeLiveFrom: a relation that does not match the mapping
// in a transaction that committed before the check at start (rows written
// under the table or publication as it was then) makes its inserts poison
// events instead of stopping the stream.
func TestUnmappableBeforeLiveFrom(t *testing.T) {
	d := newDecoder(t, Config{LiveFrom: commitLSN + 1})
	tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", outboxCols(pgJSONB)[:4]...),
		msgInsert(outboxRelID, text(eventUUID), text("order"), text("o-1"), text("T")))
	if ev := tx.Events[0]; !errors.Is(ev.Err, ErrMissingColumn) {
		t.Fatalf("event error %v, want %v", ev.Err, ErrMissingColumn)
	}
	d = newDecoder(t, Config{LiveFrom: commitLSN})
	wantSchemaChanged(t, d, ErrMissingColumn, msgRelation(outboxRelID, "public", "outbox", outboxCols(pgJSONB)[:4]...))
}

func TestEnumSchema(t *testing.T) {
	got := enumSchema([]string{`a"b`, "c"}, true)
	want := `{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"a\"b,c"}}`
	if got != want {
		t.Errorf("enumSchema = %s, want %s", got, want)
	}
}

// TestRenamedSinceStart: a Relation message from before the check at start
// that lacks a mapped column, with a column the table no longer has in its
// place, is mapped by place (a rename since); one whose column in that
// place still exists is not.
func TestRenamedSinceStart(t *testing.T) {
	old := outboxCols(pgJSONB)
	old[2].name = "aggregateid"
	now := map[string][]string{"public.outbox": {"id", "aggregatetype", "aggregate_id", "type", "payload"}}
	d := newDecoder(t, Config{KeyColumn: "aggregate_id", LiveFrom: commitLSN + 1, Columns: now})
	tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", old...), outboxRow(eventUUID, "order", "o-1", "T", text("{}")))
	if ev := tx.Events[0]; ev.Err != nil || string(ev.Key) != "o-1" {
		t.Fatalf("event %s, want key o-1 mapped from the column's old name", fmtEvent(ev))
	}
	// The table now has aggregateid elsewhere: not a rename.
	now = map[string][]string{"public.outbox": {"id", "aggregatetype", "type", "payload", "aggregate_id"}}
	d = newDecoder(t, Config{KeyColumn: "aggregate_id", LiveFrom: commitLSN + 1, Columns: now})
	tx = oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", old...), outboxRow(eventUUID, "order", "o-1", "T", text("{}")))
	if ev := tx.Events[0]; !errors.Is(ev.Err, ErrMissingColumn) {
		t.Fatalf("event error %v, want %v", ev.Err, ErrMissingColumn)
	}
}
