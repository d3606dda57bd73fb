package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestCommittedOutboxRowsExactlyOnceInCommitOrder is the core promise:
// concurrent writers, rollbacks and business rows; every committed outbox
// row arrives once, nothing else arrives, each key in commit order, and the
// records are byte-exact, read to the topics' end offsets once the slot's
// confirmed_flush_lsn has passed the last commit (from a witness slot).
func TestCommittedOutboxRowsExactlyOnceInCommitOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wit := e.Witness(t)
	w := &harness.Workload{Writers: 4, Events: 10000, Aggregates: 100, MaxTxRows: 20, Rollback: 0.1, Business: 0.3}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()

	start := time.Now()
	if err := w.Run(context.Background(), e.Env); err != nil {
		t.Fatalf("writers: %v", err)
	}
	written := time.Since(start)
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), 2*time.Minute)
	all := time.Since(start)
	events, err := harness.Events(rows, wit.CommitEnds(t))
	if err != nil {
		t.Fatal(err)
	}
	var last pglogrepl.LSN
	for _, ev := range events {
		last = max(last, ev.CommitEnd)
	}
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("confirmed_flush_lsn to pass the last commit (%s)", last), func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= last
	})
	recs := c.ToEnd()
	v := e2etest.CheckRecords(t, e, recs, rows, w.RolledBack(), 3, false)
	if len(w.RolledBack()) == 0 {
		t.Errorf("the workload rolled nothing back; the test proves less than it claims")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("FIGURES events=%d rolled_back=%d records=%d duplicates=%d writers_done=%s all_in_kafka=%s events_per_s=%.0f peak_rss_mb=%.1f",
		len(rows), len(w.RolledBack()), len(recs), v.Duplicates, written.Round(time.Millisecond), all.Round(time.Millisecond),
		float64(len(rows))/all.Seconds(), relay.PeakRSSMB())
}

// TestKafkaDownHoldsTheSlot: with Kafka stopped, outbox inserts do not move
// confirmed_flush_lsn past them; after Kafka returns, all arrive.
func TestKafkaDownHoldsTheSlot(t *testing.T) {
	testbed.Disrupt(t)
	e := newEnv(t)
	w := &harness.Workload{Writers: 1, Events: 200, Aggregates: 10, MaxTxRows: 5}
	w.Prepare(t, e.Env)
	wit := e.Witness(t)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	if err := w.Run(context.Background(), e.Env); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(int(w.Committed()), time.Minute)

	e.Bed.StopKafka(t)
	kafkaUp := false
	defer func() {
		if !kafkaUp {
			e.Bed.StartKafka(t)
		}
	}()
	// One transaction while Kafka is down.
	xid := e.TxXid(t, func(tx pgx.Tx) {
		for i := 0; i < 50; i++ {
			if _, err := tx.Exec(context.Background(), `INSERT INTO outbox VALUES ($1, $2, 'agg-down', 'OrderCreated', jsonb_build_object('seq', $3::int))`, harness.NewUUID(), e.AggType(0), i+1); err != nil {
				t.Fatal(err)
			}
		}
	})
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	// Several status intervals pass with the records unacknowledged.
	for i := 0; i < 8; i++ {
		time.Sleep(time.Second)
		e.CheckPending(t, wit, xid, "the transaction committed while Kafka was down")
		if t.Failed() {
			t.FailNow()
		}
		if relay.Exited() {
			t.Fatalf("walrelay exited while Kafka was down")
		}
	}
	e.Bed.StartKafka(t)
	kafkaUp = true
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), 2*time.Minute)
	harness.WaitFor(t, time.Minute, "confirmed_flush_lsn to pass the transaction once Kafka is back", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, nil, 3, true)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// TestGracefulStopLosesAndDuplicatesNothing: SIGTERM mid-stream, restart,
// and every row arrives exactly once.
func TestGracefulStopLosesAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := &harness.Workload{Writers: 2, Events: 6000, Aggregates: 50, MaxTxRows: 10, Rollback: 0.05, Pause: time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()

	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), e.Env) }()
	stops := 0
	for i := 0; i < 3; i++ {
		// Stop while the writers are at work (a quarter further each time),
		// then start again.
		relay.WaitStreaming()
		quarter := int64((i + 1) * w.Events / 4)
		harness.WaitFor(t, time.Minute, "the writers to progress", func() bool { return w.Committed() >= quarter })
		if code := relay.Stop(time.Minute); code != 0 {
			t.Fatalf("walrelay exit code %d after SIGTERM, want 0", code)
		}
		stops++
		if !strings.Contains(relay.Log(), `"stopped"`) {
			t.Errorf("walrelay's log has no final \"stopped\" line")
		}
		relay = e.Start(t)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), 2*time.Minute)
	v := e2etest.CheckRecords(t, e, c.ToEnd(), rows, w.RolledBack(), 3, false)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
	t.Logf("FIGURES graceful_stops=%d events=%d duplicates=%d", stops, len(rows), v.Duplicates)
}

// TestIdleOutboxDoesNotPinWAL: only a non-outbox table is written. While
// the writes go on, the slot confirms again and again past a WAL position
// taken during them (a slot pinned by the idle outbox never would), and
// once they stop it confirms past the last of them. How long each catch-up
// took and the lag sampled meanwhile are figures; the waits have deadlines
// only against a hang.
func TestIdleOutboxDoesNotPinWAL(t *testing.T) {
	testbed.Disrupt(t) // alone, so that no other test's WAL is in flight
	e := newEnv(t)
	const interval = time.Second
	relay := e.Start(t, "--status-interval", interval.String())
	relay.WaitStreaming()

	conn := harness.Connect(t, e.DSN)
	defer conn.Close(context.Background())
	startLSN := e.Bed.CurrentWALLSN(t, e.DSN)
	ctx, stop := context.WithCancel(context.Background())
	writerDone := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if _, err := conn.Exec(ctx, `INSERT INTO orders (customer, total, note) SELECT 'c', i, repeat('x', 500) FROM generate_series(1, 500) i`); err != nil && ctx.Err() == nil {
				writerDone <- err
				return
			}
			time.Sleep(10 * time.Millisecond) // about 15 MB of WAL a second, not all the disk can take
		}
		writerDone <- nil
	}()
	defer stop()

	const wantWAL, wantRounds = 64 << 20, 4 // enough WAL and catch-ups for a pinned slot to show
	var catchUps []time.Duration
	var maxLag uint64
	began := time.Now()
	for len(catchUps) < wantRounds || uint64(e.Bed.CurrentWALLSN(t, e.DSN)-startLSN) < wantWAL {
		if time.Since(began) > 10*time.Minute {
			t.Fatalf("only %d bytes of WAL in %d rounds after 10 minutes; the test needs %d in %d", uint64(e.Bed.CurrentWALLSN(t, e.DSN)-startLSN), len(catchUps), wantWAL, wantRounds)
		}
		at, from := e.Bed.CurrentWALLSN(t, e.DSN), time.Now()
		harness.WaitFor(t, 2*time.Minute, "the slot to confirm past non-outbox WAL written while the writes go on", func() bool {
			select {
			case err := <-writerDone:
				t.Fatalf("writer: %v", err)
			default:
			}
			if relay.Exited() {
				t.Fatalf("walrelay exited")
			}
			maxLag = max(maxLag, slotLag(t, e))
			return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= at
		})
		catchUps = append(catchUps, time.Since(from).Round(time.Millisecond))
	}
	stop()
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	writing := time.Since(began)
	stopLSN := e.Bed.CurrentWALLSN(t, e.DSN)
	stopped := time.Now()
	harness.WaitFor(t, 2*time.Minute, "the slot to confirm past the last non-outbox write", func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited")
		}
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= stopLSN
	})
	settle := time.Since(stopped)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
	t.Logf("FIGURES wal_written_mb=%.1f writing=%s catch_ups=%d catch_up_max=%s max_lag_kb=%.1f settle=%s status_interval=%s",
		float64(stopLSN-startLSN)/(1<<20), writing.Round(time.Millisecond), len(catchUps), slices.Max(catchUps), float64(maxLag)/1024, settle.Round(time.Millisecond), interval)
}

// TestHugeTransactionAndLargePayload: a transaction of 100,000 rows,
// spilled to disk by the walsender, and a 1 MB jsonb payload arrive whole.
func TestHugeTransactionAndLargePayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	db := e.DSN[strings.LastIndex(e.DSN, "/")+1:]
	if i := strings.IndexByte(db, '?'); i >= 0 {
		db = db[:i]
	}
	// The walsender reads this at connection start: the transaction is far
	// larger than its decoding memory and must spill.
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`ALTER DATABASE %q SET logical_decoding_work_mem = '64kB'`, db))
	c := e.Collect(t)
	relay := e.Start(t, "--kafka-max-message-bytes", "16777216")
	relay.WaitStreaming()

	const n = 100000
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 97), 'OrderCreated',
		jsonb_build_object('seq', 1 + i / 97, 'pad', repeat('p', 100)) FROM generate_series(0, $2 - 1) i`, e.AggType(0), n)
	// A 1 MB jsonb payload in a transaction of its own.
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES (gen_random_uuid(), $1, 'agg-big', 'Big', jsonb_build_object('blob', repeat('b', 1000000)))`, e.AggType(1))

	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), 3*time.Minute)
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, nil, 3, false)

	var spilled int64
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT coalesce(sum(spill_txns), 0) FROM pg_stat_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&spilled); err != nil {
		t.Fatal(err)
	}
	if spilled == 0 {
		t.Errorf("pg_stat_replication_slots shows no spilled transaction: the big transaction did not exceed logical_decoding_work_mem")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
	t.Logf("FIGURES huge_tx_rows=%d spilled_txns=%d peak_rss_mb=%.1f", n, spilled, relay.PeakRSSMB())
}

func slotLag(t *testing.T, e *env) uint64 {
	t.Helper()
	var lag int64
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&lag); err != nil {
		t.Fatal(err)
	}
	return uint64(max(lag, 0))
}
