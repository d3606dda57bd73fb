package recovery

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// TestFramesDecodeAsTheStream: a recovered row, turned into pgoutput
// messages, decodes through the stream's decoder into the record the
// stream would have made: topic, key, value, id and headers.
func TestFramesDecodeAsTheStream(t *testing.T) {
	dec, err := decode.New(decode.Config{HeaderColumns: []decode.HeaderColumn{{Column: "type", Header: "eventType"}}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	rel := pgoutput.Relation{ID: 16384, Namespace: "public", Name: "outbox", Columns: []pgoutput.Column{
		{Name: "id", TypeOID: 2950, TypeMod: -1}, {Name: "aggregatetype", TypeOID: 25, TypeMod: -1},
		{Name: "aggregateid", TypeOID: 25, TypeMod: -1}, {Name: "type", TypeOID: 25, TypeMod: -1},
		{Name: "payload", TypeOID: 3802, TypeMod: -1}, {Name: "created_at", TypeOID: 1184, TypeMod: -1},
	}}
	at := time.Date(2026, 12, 6, 5, 0, 0, 123000, time.UTC)
	var f frames
	var tx *decode.Tx
	// N.B. one message at a time: each reuses the frames' buffer.
	build := []func() []byte{
		func() []byte { return f.relation(rel) },
		func() []byte { return f.begin(7, at, 7) },
		func() []byte {
			return f.insert(rel.ID, [][]byte{[]byte("7c1a0e4e-1f2b-4c3d-9e8f-0a1b2c3d4e5f"), []byte("Order"), []byte("o-1"), []byte("OrderCreated"), []byte(`{"n": 1}`), nil})
		},
		func() []byte { return f.commit(7, at) },
	}
	for i, b := range build {
		got, err := dec.Decode(b())
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got != nil {
			tx = got
		}
	}
	if tx == nil || !tx.Last || tx.EndLSN != 7 || !tx.CommitTime.Equal(at) || len(tx.Events) != 1 {
		t.Fatalf("tx = %+v, want one event ending at 0/7 committed at %s", tx, at)
	}
	ev := tx.Events[0]
	if ev.Err != nil {
		t.Fatalf("event error: %v", ev.Err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"topic", ev.Topic, "outbox.event.Order"},
		{"key", string(ev.Key), "o-1"},
		{"value", string(ev.Value), `{"n": 1}`},
		{"id", string(ev.ID), "7c1a0e4e-1f2b-4c3d-9e8f-0a1b2c3d4e5f"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if len(ev.Headers) != 1 || ev.Headers[0].Key != "eventType" || string(ev.Headers[0].Value) != "OrderCreated" {
		t.Errorf("headers = %+v, want eventType: OrderCreated", ev.Headers)
	}
}
