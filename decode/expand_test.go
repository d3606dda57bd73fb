package decode

import (
	"errors"
	"testing"
)

// The expected bytes follow Debezium 3.6.1's JsonSchemaData and Kafka
// 4.3.1's JsonConverter (asJsonSchema, convertToJson) as read in their
// sources, written out by hand; `make compat` checks them against the
// real ones (configuration expand).
func TestExpandJSONPayload(t *testing.T) {
	js := Config{ValueFormat: FormatJSON, ExpandJSONPayload: true}
	jss := Config{ValueFormat: FormatJSONSchema, ExpandJSONPayload: true, NullableColumns: []string{"payload"}}
	tests := []struct {
		name    string
		cfg     Config
		payload val
		want    string
		wantErr error
	}{
		{"object with every kind", js, text(`{"b": true, "i": 7, "l": 3000000000, "d": 2.50, "s": "x\"y", "n": null, "e": [], "o": {"p": 1}}`),
			`{"b":true,"i":7,"l":3000000000,"d":2.5,"s":"x\"y","o":{"p":1}}`, nil},
		{"doubles as Java writes them", js, text(`{"a": 1.0, "b": 1e7, "c": 0.001, "d": 0.0001, "e": 123456.789, "f": -0.5, "g": 1.5e-10}`),
			`{"a":1.0,"b":1.0E7,"c":0.001,"d":1.0E-4,"e":123456.789,"f":-0.5,"g":1.5E-10}`, nil},
		{"arrays of numbers, strings and objects", js, text(`{"n": [1, 2, null], "s": ["a"], "o": [{"x": 1}, {"x": 2}]}`),
			`{"n":[1,2,null],"s":["a"],"o":[{"x":1},{"x":2}]}`, nil},
		{"objects of two shapes merge; a missing member is null", js, text(`{"o": [{"x": 1}, {"y": "a"}]}`),
			`{"o":[{"x":1,"y":null},{"x":null,"y":"a"}]}`, nil},
		{"empty object", js, text(`{}`), `{}`, nil},
		{"top-level []: stays a string", js, text(`[]`), `"[]"`, nil},
		{"a scalar is not expanded", js, text(`"just a string"`), `"\"just a string\""`, nil},
		{"leading whitespace: not expanded", js, text(` {"a": 1}`), `" {\"a\": 1}"`, nil},
		{"mixed array: left as it is", js, text(`{"m": [1, "a"]}`), `"{\"m\": [1, \"a\"]}"`, nil},
		{"int and long in one array: left as it is", js, text(`{"m": [1, 3000000000]}`), `"{\"m\": [1, 3000000000]}"`, nil},
		{"only nulls in an array: left as it is", js, text(`{"m": [null]}`), `"{\"m\": [null]}"`, nil},
		{"not JSON: left as it is", js, text(`{nope`), `"{nope"`, nil},
		{"NULL payload", js, null(), `null`, nil},
		{"duplicate member: first place, last value", js, text(`{"a": 1, "b": 2, "a": 3}`), `{"a":3,"b":2}`, nil},
		{"null member as bytes", Config{ValueFormat: FormatJSON, ExpandJSONPayload: true, ExpandJSONNullAsBytes: true}, text(`{"n": null, "a": [null]}`), `{"n":null,"a":[null]}`, nil},
		{"big integer: Debezium's converter fails", js, text(`{"big": 12345678901234567890123}`), ``, ErrBadValue},
		{"top-level array: Debezium's converter fails", js, text(`[1, 2]`), ``, ErrBadValue},
		{"member types differ between objects: fails", js, text(`{"o": [{"x": 1}, {"x": "a"}]}`), ``, ErrBadValue},
		{"json-schema: inferred schema", jss, text(`{"i": 7, "s": "x", "o": {"p": [1.5]}}`),
			`{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"i"},{"type":"string","optional":true,"field":"s"},` +
				`{"type":"struct","fields":[{"type":"array","items":{"type":"double","optional":true},"optional":true,"field":"p"}],"optional":true,"name":"payload.o","field":"o"}],"optional":true,"name":"payload"},` +
				`"payload":{"i":7,"s":"x","o":{"p":[1.5]}}}`, nil},
		{"json-schema: merged objects are a required struct", jss, text(`{"o": [{"x": 1}, {"y": true}]}`),
			`{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"x"},{"type":"boolean","optional":true,"field":"y"}],"optional":false,"name":"payload.o"},"optional":true,"field":"o"}],"optional":true,"name":"payload"},` +
				`"payload":{"o":[{"x":1,"y":null},{"x":null,"y":true}]}}`, nil},
		{"json-schema: top-level [] has a null schema", jss, text(`[]`), `{"schema":null,"payload":"[]"}`, nil},
		{"json-schema: not expanded keeps the column's schema", jss, text(`42`),
			`{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"42"}`, nil},
		{"envelope: expanded payload inside", Config{ValueFormat: FormatJSON, ExpandJSONPayload: true, EnvelopeFields: []EnvelopeField{{"type", "eventType"}}}, text(`{"a": 1}`),
			`{"payload":{"a":1},"eventType":"Created"}`, nil},
		{"envelope: [] fails Debezium's router", Config{ValueFormat: FormatJSON, ExpandJSONPayload: true, EnvelopeFields: []EnvelopeField{{"type", "eventType"}}}, text(`[]`), ``, ErrBadValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, tc.cfg)
			tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", outboxCols(pgJSONB)...),
				msgInsert(outboxRelID, text(eventUUID), text("Order"), text("o-1"), text("Created"), tc.payload))
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
			if string(ev.Value) != tc.want {
				t.Errorf("value\n %s\nwant\n %s", ev.Value, tc.want)
			}
		})
	}
	if err := (Config{ExpandJSONPayload: true}).Validate(); err == nil {
		t.Error("expand with the string format accepted")
	}
}

// The json-schema envelope as Debezium 3.6.1's router builds it
// (getValueSchema, getSchemaName) and JsonConverter writes it, worked out
// by hand: a struct of the payload's and the placed columns' schemas,
// named PREFIX.SCHEMA.TABLE.ROUTE.Value after the first event of its
// payload schema (or version), "optional":false.
func TestJSONSchemaEnvelope(t *testing.T) {
	env := []EnvelopeField{{"type", "eventType"}, {"id", "id"}}
	base := Config{ValueFormat: FormatJSONSchema, EnvelopeFields: env, SchemaNamePrefix: "shop", NullableColumns: []string{"payload"}}
	fields := `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},` +
		`{"type":"string","optional":false,"field":"eventType"},` +
		`{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1,"field":"id"}`
	payload := func(p string) string {
		return `"payload":{"payload":` + p + `,"eventType":"Created","id":"` + eventUUID + `"}}`
	}

	d := newDecoder(t, base)
	tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", outboxCols(pgJSONB)...),
		msgInsert(outboxRelID, text(eventUUID), text("Order"), text("o-1"), text("Created"), text(`{"a": 1}`)),
		msgInsert(outboxRelID, text(eventUUID), text("Customer"), text("c-1"), text("Created"), null()))
	want := []string{
		`{"schema":{"type":"struct","fields":[` + fields + `],"optional":false,"name":"shop.public.outbox.Order.Value"},` + payload(`"{\"a\": 1}"`),
		// N.B. the same payload schema: the struct (and its name) of the first event.
		`{"schema":{"type":"struct","fields":[` + fields + `],"optional":false,"name":"shop.public.outbox.Order.Value"},` + payload(`null`),
	}
	for i, ev := range tx.Events {
		if ev.Err != nil {
			t.Fatalf("event %d: %v", i, ev.Err)
		}
		if string(ev.Value) != want[i] {
			t.Errorf("event %d value\n %s\nwant\n %s", i, ev.Value, want[i])
		}
	}

	// With a version column: one struct per version, "version" after the name.
	vcfg := base
	vcfg.SchemaVersionColumn = "ver"
	cols := append(outboxCols(pgJSONB), col{name: "ver", oid: pgInt4})
	d = newDecoder(t, vcfg)
	tx = oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", cols...),
		msgInsert(outboxRelID, text(eventUUID), text("Order"), text("o-1"), text("Created"), text(`{}`), text("3")),
		msgInsert(outboxRelID, text(eventUUID), text("Customer"), text("c-1"), text("Created"), text(`{}`), null()))
	want = []string{
		`{"schema":{"type":"struct","fields":[` + fields + `],"optional":false,"name":"shop.public.outbox.Order.Value","version":3},` + payload(`"{}"`),
		`{"schema":{"type":"struct","fields":[` + fields + `],"optional":false,"name":"shop.public.outbox.Customer.Value"},` + payload(`"{}"`),
	}
	for i, ev := range tx.Events {
		if ev.Err != nil {
			t.Fatalf("versioned event %d: %v", i, ev.Err)
		}
		if string(ev.Value) != want[i] {
			t.Errorf("versioned event %d value\n %s\nwant\n %s", i, ev.Value, want[i])
		}
	}

	// Expanded: the payload's field is the inferred struct.
	ecfg := base
	ecfg.ExpandJSONPayload = true
	d = newDecoder(t, ecfg)
	tx = oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", outboxCols(pgJSONB)...),
		msgInsert(outboxRelID, text(eventUUID), text("Order"), text("o-1"), text("Created"), text(`{"a": 1}`)))
	wantE := `{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"}],"optional":true,"name":"payload","field":"payload"},` +
		`{"type":"string","optional":false,"field":"eventType"},{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1,"field":"id"}],"optional":false,"name":"shop.public.outbox.Order.Value"},` + payload(`{"a":1}`)
	if ev := tx.Events[0]; ev.Err != nil || string(ev.Value) != wantE {
		t.Errorf("expanded: value\n %s (error %v)\nwant\n %s", ev.Value, ev.Err, wantE)
	}

	if err := (Config{ValueFormat: FormatJSONSchema, EnvelopeFields: env}).Validate(); err == nil {
		t.Error("json-schema envelope without a schema name prefix accepted")
	}
}
