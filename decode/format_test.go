package decode

import (
	"errors"
	"testing"
)

// The expected bytes are what Kafka Connect 4.3.1's converters wrote for
// Debezium 3.6.1's Outbox Event Router in `make compat` (bench/cmd/compat),
// written out by hand here.
func TestDecodeFormats(t *testing.T) {
	int8Cols := []col{
		{name: "id", oid: pgUUID, key: true},
		{name: "aggregatetype", oid: pgText},
		{name: "aggregateid", oid: pgInt8},
		{name: "type", oid: pgText},
		{name: "payload", oid: pgBytea},
	}
	row := func(payload val) []val {
		return []val{text(eventUUID), text("Order"), text("o-1"), text("Created"), payload}
	}
	tests := []struct {
		name               string
		cfg                Config
		cols               []col // default outboxCols(pgJSONB)
		row                []val
		wantKey, wantValue string
		wantNull           bool   // no value (a tombstone)
		wantTopic          string // default outbox.event.Order
		wantErr            error
	}{
		{
			name:    "json: jsonb payload is a JSON string, key too",
			cfg:     Config{KeyFormat: FormatJSON, ValueFormat: FormatJSON},
			row:     row(text(`{"a": "ü \"q\" back\\slash", "n": [1, 2]}`)),
			wantKey: `"o-1"`, wantValue: `"{\"a\": \"ü \\\"q\\\" back\\\\slash\", \"n\": [1, 2]}"`,
		},
		{
			name:    "json: control characters as Jackson escapes them",
			cfg:     Config{ValueFormat: FormatJSON},
			cols:    outboxCols(pgText),
			row:     row(text("a\tb\nc\rd\be\ff\x01g\x1fh/\u2028")),
			wantKey: "o-1", wantValue: `"a\tb\nc\rd\be\ff\u0001g\u001Fh/` + "\u2028" + `"`,
		},
		{
			name:    "json: a code point above U+FFFF as its surrogate pair, the rest of UTF-8 kept",
			cfg:     Config{KeyFormat: FormatJSON, ValueFormat: FormatJSON},
			row:     []val{text(eventUUID), text("Order"), text("k-🎉"), text("Created"), text(`"ü✓日🎉𝄞"`)},
			wantKey: `"k-\uD83C\uDF89"`, wantValue: `"\"ü✓日\uD83C\uDF89\uD834\uDD1E\""`,
		},
		{
			name:    "json: NULL payload is the JSON null",
			cfg:     Config{ValueFormat: FormatJSON},
			row:     row(null()),
			wantKey: "o-1", wantValue: `null`,
		},
		{
			name:      "json-schema: envelope with Debezium's Json schema, key schema not optional",
			cfg:       Config{KeyFormat: FormatJSONSchema, ValueFormat: FormatJSONSchema, NullableColumns: []string{"payload"}},
			row:       row(text(`{"x": 1}`)),
			wantKey:   `{"schema":{"type":"string","optional":false},"payload":"o-1"}`,
			wantValue: `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"x\": 1}"}`,
		},
		{
			name:    "json-schema: NULL payload",
			cfg:     Config{ValueFormat: FormatJSONSchema, NullableColumns: []string{"payload"}},
			row:     row(null()),
			wantKey: "o-1", wantValue: `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}`,
		},
		{
			name:    "json-schema: bigint key and bytea payload",
			cfg:     Config{KeyFormat: FormatJSONSchema, ValueFormat: FormatJSONSchema},
			cols:    int8Cols,
			row:     []val{text(eventUUID), text("Order"), text("42"), text("Created"), text(`\x00ff41`)},
			wantKey: `{"schema":{"type":"int64","optional":false},"payload":42}`, wantValue: `{"schema":{"type":"bytes","optional":false},"payload":"AP9B"}`,
		},
		{
			name:    "json: bigint key is a number",
			cfg:     Config{KeyFormat: FormatJSON},
			cols:    int8Cols,
			row:     []val{text(eventUUID), text("Order"), text("42"), text("Created"), text(`\x00ff41`)},
			wantKey: `42`, wantValue: "\x00\xffA",
		},
		{
			name:    "bytes: bytea payload raw",
			cfg:     Config{ValueFormat: FormatBytes},
			cols:    outboxCols(pgBytea),
			row:     row(text(`\x00ff41`)),
			wantKey: "o-1", wantValue: "\x00\xffA",
		},
		{
			name:    "bytes: a jsonb payload is refused",
			cfg:     Config{ValueFormat: FormatBytes},
			row:     row(text(`{}`)),
			wantErr: ErrUnsupportedType,
		},
		{
			name:    "envelope: payload then the aliases in order, typed",
			cfg:     Config{ValueFormat: FormatJSON, EnvelopeFields: []EnvelopeField{{"type", "eventType"}, {"id", "eventId"}, {"aggregateid", "n"}}},
			cols:    append(outboxCols(pgJSONB)[:2:2], col{name: "aggregateid", oid: pgInt8}, col{name: "type", oid: pgText}, col{name: "payload", oid: pgJSONB}),
			row:     []val{text(eventUUID), text("Order"), text("7"), null(), text(`[1]`)},
			wantKey: "7", wantValue: `{"payload":"[1]","eventType":null,"eventId":"` + eventUUID + `","n":7}`,
		},
		{
			name:    "tombstone: NULL payload",
			cfg:     Config{ValueFormat: FormatJSONSchema, TombstoneOnEmptyPayload: true},
			row:     row(null()),
			wantKey: "o-1", wantNull: true,
		},
		{
			name:    "tombstone: blank text payload (Java's trim)",
			cfg:     Config{TombstoneOnEmptyPayload: true},
			cols:    outboxCols(pgText),
			row:     row(text(" \t\n\x01")),
			wantKey: "o-1", wantNull: true,
		},
		{
			name:    "tombstone: a JSON empty string is not empty",
			cfg:     Config{TombstoneOnEmptyPayload: true},
			row:     row(text(`""`)),
			wantKey: "o-1", wantValue: `""`,
		},
		{
			name:    "tombstone: an empty bytea is not a tombstone",
			cfg:     Config{TombstoneOnEmptyPayload: true},
			cols:    outboxCols(pgBytea),
			row:     row(text(`\x`)),
			wantKey: "o-1", wantValue: "",
		},
		{
			name:    "topic regex: groups by name and number",
			cfg:     Config{TopicRegex: `(?<domain>[a-z]+)\.(.*)`, Topic: `events.${domain}.$2\-x`, RouteColumn: "type"},
			row:     []val{text(eventUUID), text("Order"), text("o-1"), text("sales.created"), text(`{}`)},
			wantKey: "o-1", wantValue: `{}`, wantTopic: "events.sales.created-x",
		},
		{
			name:    "topic regex: no match routes to the value itself",
			cfg:     Config{TopicRegex: `(?<domain>[a-z]+)\.(.*)`, Topic: `events.${domain}`},
			row:     row(text(`{}`)),
			wantKey: "o-1", wantValue: `{}`, wantTopic: "Order",
		},
		{
			name:    "topic regex: Java's multi-digit group rule ($10 is $1 then 0 with one group)",
			cfg:     Config{TopicRegex: `(.*)`, Topic: `x.$10`},
			row:     row(text(`{}`)),
			wantKey: "o-1", wantValue: `{}`, wantTopic: "x.Order0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cols := tc.cols
			if cols == nil {
				cols = outboxCols(pgJSONB)
			}
			d := newDecoder(t, tc.cfg)
			if schemaReason(tc.wantErr) {
				wantSchemaChanged(t, d, tc.wantErr, msgRelation(outboxRelID, "public", "outbox", cols...))
				return
			}
			tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", cols...), msgInsert(outboxRelID, tc.row...))
			if len(tx.Events) != 1 {
				t.Fatalf("%d events, want 1", len(tx.Events))
			}
			ev := tx.Events[0]
			if tc.wantErr != nil {
				if !errors.Is(ev.Err, tc.wantErr) {
					t.Fatalf("error %v, want %v", ev.Err, tc.wantErr)
				}
				return
			}
			if ev.Err != nil {
				t.Fatalf("poison event: %v", ev.Err)
			}
			if string(ev.Key) != tc.wantKey {
				t.Errorf("key %q, want %q", ev.Key, tc.wantKey)
			}
			switch {
			case tc.wantNull && ev.Value != nil:
				t.Errorf("value %q, want none (a tombstone)", ev.Value)
			case !tc.wantNull && (ev.Value == nil || string(ev.Value) != tc.wantValue):
				t.Errorf("value %q (nil %v), want %q", ev.Value, ev.Value == nil, tc.wantValue)
			}
			want := tc.wantTopic
			if want == "" {
				want = "outbox.event.Order"
			}
			if ev.Topic != want {
				t.Errorf("topic %q, want %q", ev.Topic, want)
			}
			if string(ev.ID) != eventUUID {
				t.Errorf("id %q", ev.ID)
			}
		})
	}
}

func TestFormatConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"unknown value format", Config{ValueFormat: "avro"}},
		{"bytes key", Config{KeyFormat: FormatBytes}},
		{"envelope with string", Config{EnvelopeFields: []EnvelopeField{{"type", "t"}}}},
		{"envelope with json-schema without a schema name prefix", Config{ValueFormat: FormatJSONSchema, EnvelopeFields: []EnvelopeField{{"type", "t"}}}},
		{"expand with string", Config{ExpandJSONPayload: true}},
		{"envelope alias payload", Config{ValueFormat: FormatJSON, EnvelopeFields: []EnvelopeField{{"type", "payload"}}}},
		{"look-ahead regex", Config{TopicRegex: `(?=a).*`, Topic: "x"}},
		{"unknown named group", Config{TopicRegex: `(?<a>.*)`, Topic: "${b}"}},
		{"group number too high", Config{TopicRegex: `(.*)`, Topic: "$2"}},
		{"lone dollar", Config{TopicRegex: `(.*)`, Topic: "a$"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err == nil {
				t.Fatalf("Validate(%+v) accepted it", tc.cfg)
			}
		})
	}
}

func TestCheckNullable(t *testing.T) {
	js := Config{KeyFormat: FormatJSONSchema, ValueFormat: FormatJSONSchema, NullableColumns: []string{"payload"}}
	for _, tc := range []struct {
		name, column, flag string
		cfg                Config
		notNull, wantErr   bool
	}{
		{"nullable payload listed", "payload", "--payload-column", js, false, false},
		{"NOT NULL payload listed", "payload", "--payload-column", js, true, true},
		{"NOT NULL key not listed", "aggregateid", "--key-column", js, true, false},
		{"nullable key not listed", "aggregateid", "--key-column", js, false, true},
		{"string format: not checked", "payload", "--payload-column", Config{NullableColumns: []string{"payload"}}, true, false},
		{"a header column: not checked", "type", "--header-columns", js, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.CheckNullable(tc.column, tc.flag, tc.notNull)
			if (err != nil) != tc.wantErr || err != nil && !errors.Is(err, ErrNullability) {
				t.Errorf("CheckNullable(%q, %q, %v) = %v, want error %v", tc.column, tc.flag, tc.notNull, err, tc.wantErr)
			}
		})
	}
}

func TestCheckDefault(t *testing.T) {
	js := Config{ValueFormat: FormatJSONSchema, KeyFormat: FormatJSONSchema}
	for _, tc := range []struct {
		name, flag, expr string
		cfg              Config
		wantErr          bool
	}{
		{"constant payload default", "--payload-column", `'{}'::jsonb`, js, true},
		{"constant key default", "--key-column", `'k'::text`, js, true},
		{"constant envelope default", "--envelope-columns", `0`, js, true},
		{"a function's default", "--envelope-columns", `gen_random_uuid()`, js, false},
		{"no default", "--payload-column", ``, js, false},
		{"json format: no schema", "--payload-column", `'{}'::jsonb`, Config{ValueFormat: FormatJSON}, false},
		{"a header column", "--header-columns", `'x'::text`, js, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.CheckDefault(tc.flag, tc.expr)
			if (err != nil) != tc.wantErr || err != nil && !errors.Is(err, ErrDefault) {
				t.Errorf("CheckDefault(%q, %q) = %v, want error %v", tc.flag, tc.expr, err, tc.wantErr)
			}
		})
	}
}
