package inboxtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/inbox/inboxtest"
	"github.com/walrelay/walrelay/test/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

type orderCreated struct {
	Customer string `json:"customer"`
	Total    int64  `json:"total"`
}

// TestRun: a projection's handler against the bed: two orders applied
// (one of them delivered twice), a payload that does not decode and an
// unknown type dead-lettered.
func TestRun(t *testing.T) {
	b := testbed.Get(t)
	dsn := b.NewDatabase(t)
	b.Exec(t, dsn, `CREATE TABLE totals (customer text PRIMARY KEY, total bigint NOT NULL)`)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var ev inbox.Events
	inbox.On(&ev, "OrderCreated", func(ctx context.Context, tx pgx.Tx, _ *kgo.Record, o orderCreated) error {
		_, err := tx.Exec(ctx, `INSERT INTO totals VALUES ($1, $2) ON CONFLICT (customer) DO UPDATE SET total = totals.total + excluded.total`, o.Customer, o.Total)
		return err
	})
	first := inboxtest.Event("OrderCreated", "c1", `{"customer": "c1", "total": 5}`)
	res := inboxtest.Run(t, inboxtest.Env{Brokers: b.Brokers(), Pool: pool}, ev.Handle,
		first,
		inboxtest.Event("OrderCreated", "c1", `{"customer": "c1", "total": 7}`),
		first, // delivered again
		inboxtest.Event("OrderCreated", "c2", `not json`),
		inboxtest.Event("OrderShipped", "c1", `{}`),
	)
	if res.Stats.Applied != 2 || res.Stats.Duplicates != 1 || res.Stats.DeadLettered != 2 {
		t.Errorf("stats %+v, want 2 applied, 1 duplicate, 2 dead-lettered", res.Stats)
	}
	var total int64
	if err := pool.QueryRow(context.Background(), `SELECT total FROM totals WHERE customer = 'c1'`).Scan(&total); err != nil || total != 12 {
		t.Errorf("c1's total %d (%v), want 12", total, err)
	}
	if len(res.DeadLetters) != 2 || inbox.Header(res.DeadLetters[0], inbox.HeaderErrorClass) != inbox.ClassPermanent ||
		inbox.Header(res.DeadLetters[1], "eventType") != "OrderShipped" {
		t.Errorf("dead letters %v, want the undecodable one then OrderShipped", res.DeadLetters)
	}
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox_processed`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d ids processed (%v), want 2", n, err)
	}
}
