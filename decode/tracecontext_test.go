package decode

import (
	"testing"
)

// TestTraceContextColumn: the trace-context column, when the outbox has
// it, rides on the event as written, unparsed (a malformed value too: it
// is never a poison event); NULL, a binary value or a table without it
// give none; "-" turns it off; another name is read instead.
func TestTraceContextColumn(t *testing.T) {
	const props = "#Fri Dec 06 05:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"
	withTrace := func(name string, oid uint32) []byte {
		return msgRelation(outboxRelID, "public", "outbox", append(outboxCols(pgJSONB), col{name: name, oid: oid})...)
	}
	row := func(v val) []byte {
		return msgInsert(outboxRelID, text(eventUUID), text("order"), text("o-1"), text("Created"), text(`{}`), v)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		rel  []byte
		row  []byte
		want string // "" : none
	}{
		{"properties", Config{}, withTrace("tracingspancontext", pgText), row(text(props)), props},
		{"malformed is carried, not poison", Config{}, withTrace("tracingspancontext", pgText), row(text("garbage")), "garbage"},
		{"null", Config{}, withTrace("tracingspancontext", pgText), row(null()), ""},
		{"bytea is no context", Config{}, withTrace("tracingspancontext", pgBytea), row(text(`\x00`)), ""},
		{"off", Config{TraceContextColumn: "-"}, withTrace("tracingspancontext", pgText), row(text(props)), ""},
		{"another name", Config{TraceContextColumn: "trace"}, withTrace("trace", pgVarchar), row(text("00-x")), "00-x"},
		{"table without the column", Config{}, outboxRelation(pgJSONB), outboxRow(eventUUID, "order", "o-1", "Created", text(`{}`)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, tc.cfg)
			tx := oneTx(t, d, tc.rel, tc.row)
			if len(tx.Events) != 1 {
				t.Fatalf("%d events", len(tx.Events))
			}
			ev := tx.Events[0]
			if ev.Err != nil {
				t.Fatalf("poison event: %v", ev.Err)
			}
			if string(ev.TraceContext) != tc.want || (tc.want == "") != (ev.TraceContext == nil) {
				t.Errorf("trace context %q, want %q", ev.TraceContext, tc.want)
			}
			if string(ev.Key) != "o-1" || string(ev.Value) != `{}` || string(ev.ID) != eventUUID {
				t.Errorf("event %q %q %q", ev.ID, ev.Key, ev.Value)
			}
		})
	}
}

// TestTraceContextMessageField: with --source messages the trace context
// is the content's tracingspancontext field, optional: a message without
// it is no poison event and has no context.
func TestTraceContextMessageField(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct{ name, content, want string }{
		{"with", `{"id": "e-1", "type": "T", "payload": {}, "aggregateid": "42", "aggregatetype": "order", "tracingspancontext": "` + tp + `"}`, tp},
		{"without", `{"id": "e-1", "type": "T", "payload": {}, "aggregateid": "42", "aggregatetype": "order"}`, ""},
		{"null", `{"id": "e-1", "type": "T", "payload": {}, "aggregateid": "42", "aggregatetype": "order", "tracingspancontext": null}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, Config{Messages: true})
			tx := oneTx(t, d, msgMessage(commitLSN, "outbox", tc.content))
			if len(tx.Events) != 1 || tx.Events[0].Err != nil {
				t.Fatalf("events %+v", tx.Events)
			}
			ev := tx.Events[0]
			if string(ev.TraceContext) != tc.want || string(ev.Key) != "42" || string(ev.Value) != "{}" {
				t.Errorf("trace context %q key %q value %q, want %q 42 {}", ev.TraceContext, ev.Key, ev.Value, tc.want)
			}
		})
	}
}
