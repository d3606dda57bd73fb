package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/harness"
)

// TestPublicationChangedWhileStreaming: the publication is altered while
// walrelay streams so that it leaves outbox rows out (a row filter added,
// the outbox dropped from it). walrelay stops with exit 2 naming the change,
// and the slot is not confirmed past the first row the change left out:
// the commit end the witness slot reports for it.
func TestPublicationChangedWhileStreaming(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, alter, want string
		minVersion        int
	}{
		{"row filter added", `ALTER PUBLICATION %s SET TABLE outbox WHERE (aggregateid <> 'hidden')`, "has a row filter on outbox public.outbox", 150000},
		{"outbox dropped", `ALTER PUBLICATION %s DROP TABLE outbox`, "does not include table public.outbox", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if v := serverVersion(t, e); v < c.minVersion {
				t.Logf("PostgreSQL %d has no row filters: the change is made as the outbox dropped instead", v)
				c.alter, c.want = cases[1].alter, cases[1].want
			}
			wit := e.Witness(t)
			col := e.Collect(t)
			relay := e.Start(t)
			relay.WaitStreaming()
			ins := func(key string) uint32 {
				return e.ExecXid(t, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'T', '{}')`, harness.NewUUID(), e.AggType(0), key)
			}
			first := ins("shown")
			col.WaitFor(1, time.Minute)
			// The check does not hold confirmation back for good.
			waitConfirmed(t, e, relay, lastCommitEnd(t, wit, []uint32{first}))

			e.Bed.Exec(t, e.DSN, fmt.Sprintf(c.alter, pgx.Identifier{e.Pub}.Sanitize()))
			dropped := ins("hidden")
			code := relay.Wait(time.Minute)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if log := relay.Log(); !strings.Contains(log, "changed while streaming") || !strings.Contains(log, c.want) {
				t.Errorf("log lacks %q and %q:\n%s", "changed while streaming", c.want, log)
			}
			e.CheckPending(t, wit, dropped, "the first row the changed publication left out")
		})
	}
}

// TestLongTransactionDoesNotHoldConfirmation: the publication check that
// bounds confirmation while streaming waits for transactions open when it
// began only briefly. A writing transaction that stays open (a batch job, a
// session idle in transaction) must not keep walrelay from confirming the
// outbox rows committed meanwhile.
func TestLongTransactionDoesNotHoldConfirmation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wit := e.Witness(t)
	col := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()

	// N.B. a write gives the transaction an xid: it is in every snapshot's
	// xip until it ends.
	long := harness.Connect(t, e.DSN)
	ctx := context.Background()
	tx, err := long.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO orders (customer, total) VALUES ('batch', 1)`); err != nil {
		t.Fatal(err)
	}
	var xids []uint32
	for i := range 5 {
		xids = append(xids, e.ExecXid(t, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'T', '{}')`,
			harness.NewUUID(), e.AggType(i), fmt.Sprintf("agg-%d", i)))
	}
	col.WaitFor(len(xids), time.Minute)
	began := time.Now()
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, xids))
	t.Logf("FIGURES confirmed_after=%s with a writing transaction open", time.Since(began).Round(10*time.Millisecond))
	var open bool
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned() IS NOT NULL`).Scan(&open); err != nil || !open {
		t.Fatalf("the long transaction is not open with an xid any more (%v, %v): the test proved nothing", open, err)
	}
}
