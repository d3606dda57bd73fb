package main

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/test/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

func event(typ, key, id, value string) *kgo.Record {
	return &kgo.Record{Key: []byte(key), Value: []byte(value),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "eventType", Value: []byte(typ)}}}
}

// TestProject applies the demo's two event types and an unknown one, and
// refuses a payload it cannot read as a permanent error (dead-lettered at
// once, not retried).
func TestProject(t *testing.T) {
	b := testbed.Get(t)
	dsn := b.NewDatabase(t)
	b.Exec(t, dsn, Schema)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	apply := func(r *kgo.Record) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return project(ctx, tx, r) })
	}
	for _, r := range []*kgo.Record{
		event("OrderCreated", "1", "e1", `{"orderId": 1, "customer": "c1", "total": 9.99}`),
		event("OrderCreated", "2", "e2", `{"orderId": 2, "customer": "c1", "total": 0.01}`),
		event("CustomerLoyaltyReached", "c1", "e3", `{"orders": 5}`),
		event("SomethingNew", "x", "e4", `{}`),
	} {
		if err := apply(r); err != nil {
			t.Fatalf("project %s: %v", r.Headers[0].Value, err)
		}
	}
	var orders, loyalty, events int64
	var total string
	if err := conn.QueryRow(ctx, `SELECT orders, total::text, loyalty_events, (SELECT count(*) FROM event_log) FROM customer_totals WHERE customer = 'c1'`).
		Scan(&orders, &total, &loyalty, &events); err != nil {
		t.Fatal(err)
	}
	if orders != 2 || total != "10.00" || loyalty != 1 || events != 4 {
		t.Errorf("c1: %d orders, total %s, %d loyalty events, %d events logged; want 2, 10.00, 1, 4", orders, total, loyalty, events)
	}
	for _, v := range []string{`not json`, `{"orderId": 3}`} {
		if err := apply(event("OrderCreated", "3", "e5", v)); !inbox.IsPermanent(err) {
			t.Errorf("payload %s: %v, want a permanent error", v, err)
		}
	}
}
