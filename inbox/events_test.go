package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

type orderCreated struct {
	OrderID  int64       `json:"orderId"`
	Customer string      `json:"customer"`
	Total    json.Number `json:"total"`
}

func TestEvents(t *testing.T) {
	event := func(typ, value string) *kgo.Record {
		r := &kgo.Record{Value: []byte(value), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("e1")}}}
		if typ != "" {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "eventType", Value: []byte(typ)})
		}
		return r
	}
	var got []string
	var ev Events
	On(&ev, "OrderCreated", func(_ context.Context, _ pgx.Tx, r *kgo.Record, o orderCreated) error {
		got = append(got, o.Customer+" "+o.Total.String()+" "+Header(r, "id"))
		return nil
	})
	On(&ev, "Failing", func(context.Context, pgx.Tx, *kgo.Record, map[string]any) error { return errors.New("downstream") })
	ctx := context.Background()

	if err := ev.Handle(ctx, nil, event("OrderCreated", `{"orderId": 7, "customer": "c1", "total": 10.10, "extra": true}`)); err != nil || len(got) != 1 || got[0] != "c1 10.10 e1" {
		t.Errorf("OrderCreated: %v, handled %q; want c1 10.10 e1", err, got)
	}
	if err := ev.Handle(ctx, nil, event("OrderCreated", `{"orderId": "x"}`)); !IsPermanent(err) || !strings.Contains(err.Error(), "decode OrderCreated payload") {
		t.Errorf("undecodable payload: %v, want a permanent decode error", err)
	}
	if err := ev.Handle(ctx, nil, event("Failing", `{}`)); err == nil || IsPermanent(err) {
		t.Errorf("a handler's error: %v, want it as it is (retried)", err)
	}
	for _, typ := range []string{"SomethingNew", ""} {
		if err := ev.Handle(ctx, nil, event(typ, `{}`)); !IsPermanent(err) || !strings.Contains(err.Error(), "no handler for event type") {
			t.Errorf("type %q: %v, want a permanent no-handler error", typ, err)
		}
	}
	ev.Unknown = SkipUnknown
	if err := ev.Handle(ctx, nil, event("SomethingNew", `{}`)); err != nil {
		t.Errorf("SkipUnknown: %v", err)
	}
	custom := Events{TypeHeader: "type"}
	On(&custom, "A", func(context.Context, pgx.Tx, *kgo.Record, struct{}) error { return nil })
	r := &kgo.Record{Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: "type", Value: []byte("A")}}}
	if err := custom.Handle(ctx, nil, r); err != nil {
		t.Errorf("TypeHeader type: %v", err)
	}
}
