package failover

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestRecoveryInProgressIsWaitedFor: while `walrelay recover` publishes a
// lost slot's rows from the outbox table, its new slot exists and nobody
// streams it. Two instances of walrelay run find it so, and must wait for
// the recovery, neither stream from it (an aggregate's newer events would
// reach Kafka before its recovered older ones) nor exit nor recover again:
//
//   - one that waited for the slot while another streamed it (so it had
//     read the slot's marker before the recovery began), with
//     --recover-missing-slot; frozen (SIGSTOP) while the slot is lost and
//     the recovery starts, thawed once the recovery's slot exists;
//   - one started while the recovery runs, without --recover-missing-slot.
//
// The recovery reads the outbox through a proxy at an eighth of the table's
// size a second (its rows are 2 KB each), so that it runs for seconds. No walsender may hold the slot
// until it has exited 0; then one instance streams on, and every row is in
// Kafka, per aggregate in commit order.
//
// N.B. before the recovery lock (pgcatalog/recoverylock.go) the first
// instance streamed the recovery's slot from memory of the old marker, the
// second exited 2 ("recovery unfinished").
func TestRecoveryInProgressIsWaitedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, e2etest.CreatedAtDDL)
	w := &harness.Workload{Writers: 2, Aggregates: 20, MaxTxRows: 3, Rollback: 0.1, Pause: 5 * time.Millisecond, Pad: 2000}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	first := e.Start(t, "--recover-column", "created_at")
	first.WaitStreaming()
	remembering := e.Start(t, "--recover-column", "created_at", "--recover-missing-slot")
	harness.WaitFor(t, time.Minute, "the second instance to wait for the slot", func() bool {
		return strings.Contains(remembering.Log(), "waiting to take over") || remembering.Exited()
	})
	writing := w.Start(e.Env)
	defer func() { _ = writing.Stop() }()
	c.WaitFor(300, 2*time.Minute)
	e2etest.WaitMarkerCommitTime(t, e, time.Minute)

	signal := func(sig syscall.Signal) {
		if err := syscall.Kill(remembering.Pid(), sig); err != nil {
			t.Fatalf("signal %v to walrelay: %v", sig, err)
		}
	}
	signal(syscall.SIGSTOP)
	thawed := false
	defer func() {
		if !thawed {
			signal(syscall.SIGCONT)
		}
	}()
	if code := first.Stop(time.Minute); code != 0 {
		t.Fatalf("first instance exit code %d, want 0; log:\n%s", code, first.Log())
	}
	e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, e.Slot)

	recovering := slowRecovery(t, e)
	signal(syscall.SIGCONT)
	thawed = true
	fresh := e.Start(t, "--recover-column", "created_at")

	// N.B. the recovery's own connections hold no walsender on the slot:
	// an active slot before it exits is an instance streaming from it.
	var streamedDuringRecovery []string
	for !recovering.Exited() {
		if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Active {
			streamedDuringRecovery = append(streamedDuringRecovery, time.Now().Format("15:04:05.000"))
		}
		time.Sleep(50 * time.Millisecond) // a sampling interval, not a wait for a condition
	}
	if code := recovering.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("walrelay recover exit code %d, want 0; output:\n%s", code, recovering.Log())
	}
	if len(streamedDuringRecovery) > 0 {
		t.Errorf("the slot was streamed from while the recovery ran (sampled active %d times, first at %s); instance logs:\n%s\n----\n%s",
			len(streamedDuringRecovery), streamedDuringRecovery[0], remembering.Log(), fresh.Log())
	}
	const waitLine = "slot is being recovered from the outbox table by another walrelay"
	for name, p := range map[string]*relayProc{"the instance that remembered the old marker": remembering, "the instance started during the recovery": fresh} {
		if p.Exited() {
			t.Errorf("%s exited (%v); log:\n%s", name, p.Err(), p.Log())
		}
		if !strings.Contains(p.Log(), waitLine) {
			t.Errorf("%s does not say %q; log:\n%s", name, waitLine, p.Log())
		}
		if strings.Contains(p.Log(), "dropping the slot of an unfinished recovery") {
			t.Errorf("%s dropped the recovery's slot; log:\n%s", name, p.Log())
		}
	}
	if t.Failed() {
		return
	}
	harness.WaitFor(t, 2*time.Minute, "an instance to stream from the recovered slot", func() bool {
		return e.Walsender(t) != 0 || remembering.Exited() || fresh.Exited()
	})
	writeOnThenSettle(t, e, w, writing, w.Committed()+300, func() bool { return remembering.Exited() || fresh.Exited() })
	rows := e.CommittedRows(t)
	recs := c.ToEnd()
	v, recovered := e2etest.CheckRecovered(t, recs, rows, w.RolledBack(), "recover")
	if recovered == 0 {
		t.Errorf("no record carries %s: recover", e2etest.RecoveredHeader)
	}
	t.Logf("FIGURES events=%d records=%d recovered=%d duplicates=%d lost=%d order_violations=%d",
		len(rows), len(recs), recovered, v.Duplicates, v.Lost, v.OrderViolations)
	for name, p := range map[string]*relayProc{"remembering": remembering, "fresh": fresh} {
		if code := p.Stop(time.Minute); code != 0 {
			t.Errorf("%s instance exit code %d, want 0; log:\n%s", name, code, p.Log())
		}
	}
}

// slowRecovery starts `walrelay recover` of e's slot (gone) through a
// proxy passing an eighth of the outbox's size a second, so that it reads
// for about 8 s however many rows the writers committed, and returns once
// the recovery's slot exists.
func slowRecovery(t *testing.T, e *env) *harness.Relay {
	t.Helper()
	var size int64
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT coalesce(sum(pg_column_size(o.*)), 0) FROM outbox o`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	pg := harness.NewPGProxy(t, harness.PGHostPort(t, e.DSN))
	pg.SetServerRate(int(max(size/8, 64<<10)))
	t.Logf("outbox %d bytes, read by the recovery at %d bytes/s", size, max(size/8, 64<<10))
	recovering := harness.StartProcess(t, e.Bin, nil, e.Args("recover", "--recover-column", "created_at",
		"--pg-url", harness.DSNVia(t, e.DSN, pg.Addr(), nil)))
	harness.WaitFor(t, 2*time.Minute, "the recovery to create its slot", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN != 0 || recovering.Exited()
	})
	if recovering.Exited() {
		t.Fatalf("walrelay recover exited before its slot was seen; output:\n%s", recovering.Log())
	}
	return recovering
}
