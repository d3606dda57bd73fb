package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestSlotBeingCreatedIsWaitedFor: a slot that another session is still
// creating (its row is in pg_replication_slots, confirmed_flush_lsn NULL,
// while it waits for a consistent point) is not lost. walrelay waits, not
// ready, without exiting and without dropping it, even with
// --recreate-lost-slot; once the slot is ready it streams it.
func TestSlotBeingCreatedIsWaitedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	// N.B. a transaction holding an xid keeps a new logical slot from its
	// consistent point: the creating call waits for it to end.
	blocker := harness.Connect(t, e.DSN)
	defer blocker.Close(ctx)
	btx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer btx.Rollback(ctx)
	if _, err := btx.Exec(ctx, `SELECT txid_current()`); err != nil {
		t.Fatal(err)
	}
	creator := harness.Connect(t, e.DSN)
	defer creator.Close(ctx)
	var creatorPID int
	if err := creator.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&creatorPID); err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() {
		var lsn string
		created <- creator.QueryRow(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot).Scan(&lsn)
	}()
	beingCreated := func() bool {
		var n int
		if err := e.Bed.QueryRow(t, e.DSN, `SELECT count(*) FROM pg_replication_slots
			WHERE slot_name = $1 AND confirmed_flush_lsn IS NULL AND active_pid = $2`, e.Slot, creatorPID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	harness.WaitFor(t, 30*time.Second, "the slot's row with confirmed_flush_lsn NULL, held by the creating session", beingCreated)

	c := e.Collect(t)
	relays := []*relayProc{e.Start(t), e.Start(t, "--recreate-lost-slot")}
	for i, r := range relays {
		harness.WaitFor(t, time.Minute, "walrelay to say it waits for the slot being created", func() bool {
			if r.Exited() {
				t.Fatalf("walrelay %d exited (%v) while the slot was being created; log:\n%s", i, r.Err(), r.Log())
			}
			return strings.Contains(r.Log(), "being created")
		})
	}
	for i, r := range relays {
		if code, body := r.Get("/readyz"); code != 503 {
			t.Errorf("walrelay %d: /readyz = %d %q while the slot is being created, want 503", i, code, body)
		}
		if strings.Contains(r.Log(), "dropping and re-creating") {
			t.Errorf("walrelay %d set out to drop the slot being created", i)
		}
	}
	if !beingCreated() {
		t.Fatalf("the slot is no longer the one being created by pid %d", creatorPID)
	}

	if err := btx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("the creating session's pg_create_logical_replication_slot failed: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the slot did not become ready")
	}
	harness.WaitFor(t, time.Minute, "a walrelay to stream the ready slot", func() bool {
		for i, r := range relays {
			if r.Exited() {
				t.Fatalf("walrelay %d exited (%v)", i, r.Err())
			}
		}
		return e.Walsender(t) != 0
	})
	for i := 1; i <= 20; i++ {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', jsonb_build_object('seq', $3::int))`, harness.NewUUID(), e.AggType(0), i)
	}
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), time.Minute)
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, nil, 3, false)
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "confirmed_flush_lsn to pass the relayed rows", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	for i, r := range relays {
		if code := r.Stop(time.Minute); code != 0 {
			t.Errorf("walrelay %d: exit code %d after SIGTERM, want 0", i, code)
		}
	}
}

// TestStartPositionIsReReadOnceTheSlotIsHeld: the slot's confirmed position
// moves after walrelay read it and before its START_REPLICATION takes the
// slot (as when the previous holder's final status update lands late).
// PostgreSQL streams from its own, higher confirmed_flush_lsn; walrelay must
// start from that one too and never confirm the older position it read
// (PostgreSQL before 17, short of its latest minor releases, would take it).
// What PostgreSQL received is read from pg_stat_replication, what it kept
// from pg_replication_slots: neither goes below the position the slot showed.
func TestStartPositionIsReReadOnceTheSlotIsHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Bed.Exec(t, e.DSN, `CREATE PUBLICATION `+e.Pub+` FOR TABLE outbox WITH (publish = 'insert')`)
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	c := e.Collect(t)

	pg := harness.NewPGProxy(t, harness.PGHostPort(t, e.DSN))
	started, startRepl := pg.HoldBefore(harness.PGStartReplication)
	// N.B. the walsender's first keepalive carries its start position, which
	// walrelay, idle, would confirm at once and so mask what it started
	// from: keepalives are dropped until the checks are done.
	keepalives := pg.Drop(harness.PGKeepalive)
	// N.B. Kafka gets no produce request until the end: the transaction
	// streamed stays unacknowledged, so each status update walrelay sends
	// comes from its watermark, not from an idle keepalive's WAL end.
	kafka := harness.NewKafkaProxy(t, e.Bed.Brokers()[0])
	_, produce := kafka.HoldBefore(harness.KafkaProduce)
	relay := e.Start(t, "--pg-url", harness.DSNVia(t, e.DSN, pg.Addr(), nil), "--brokers", kafka.Addr(), "--status-interval", "2s")
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatalf("walrelay sent no START_REPLICATION (exited: %v)", relay.Exited())
	}
	read := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN

	// What walrelay read is now stale: a transaction is relayed and
	// confirmed by someone else.
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{}')`, harness.NewUUID(), e.AggType(0))
	e.Bed.Exec(t, e.DSN, `SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())`, e.Slot)
	moved := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
	if moved <= read {
		t.Fatalf("pg_replication_slot_advance left confirmed_flush_lsn at %s (read %s)", moved, read)
	}
	id := harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-2', 'T', '{}')`, id, e.AggType(0))

	_, _, seen := pg.Stats()
	before := seen["status_update"]
	startRepl()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	lowestSent, lowestKept := pglogrepl.LSN(1<<64-1), pglogrepl.LSN(1<<64-1)
	sawSent := false
	// N.B. three status updates: 6 s, within the 8 s (four intervals)
	// after which walrelay, hearing nothing, takes the connection for dead.
	harness.WaitFor(t, time.Minute, "three status updates from walrelay", func() bool {
		var sent, kept *string
		err := conn.QueryRow(ctx, `SELECT r.flush_lsn::text, s.confirmed_flush_lsn::text FROM pg_replication_slots s
			LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = $1`, e.Slot).Scan(&sent, &kept)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			s      *string
			lowest *pglogrepl.LSN
		}{{sent, &lowestSent}, {kept, &lowestKept}} {
			if v.s == nil {
				continue
			}
			lsn, err := pglogrepl.ParseLSN(*v.s)
			if err != nil {
				t.Fatal(err)
			}
			*v.lowest = min(*v.lowest, lsn)
		}
		sawSent = sawSent || sent != nil
		_, _, seen := pg.Stats()
		if relay.Exited() {
			t.Fatalf("walrelay exited: %v", relay.Err())
		}
		return seen["status_update"] >= before+3
	})
	if !sawSent {
		t.Fatalf("pg_stat_replication never showed walrelay's flush position")
	}
	if lowestSent < moved {
		t.Errorf("walrelay confirmed %s (pg_stat_replication.flush_lsn), below %s, the slot's confirmed_flush_lsn when it took the slot (it had read %s before)", lowestSent, moved, read)
	}
	if lowestKept < moved {
		t.Errorf("confirmed_flush_lsn went back from %s to %s", moved, lowestKept)
	}
	if got := relay.Metric("walrelay_confirmed_lsn"); pglogrepl.LSN(got) < moved {
		t.Errorf("walrelay_confirmed_lsn %s, below the slot's %s", pglogrepl.LSN(got), moved)
	}

	// Kafka answers again: the transaction after the moved position, and
	// only it, arrives.
	keepalives()
	produce()
	recs := c.WaitFor(1, time.Minute)
	if got, _ := harness.Header(recs[0], "id"); got != id || len(c.ToEnd()) != 1 {
		t.Errorf("records %d, first id %s; want only the transaction after the moved position, %s", c.Len(), got, id)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
