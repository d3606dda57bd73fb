package failover

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestRecoverySlotTakenAfterItsPrepare: an instance waiting for the slot
// checks it (the recovery lock, the marker) before its START_REPLICATION;
// here that command is held at a proxy while the slot's streamer stops,
// the slot is dropped and `walrelay recover` creates it again and runs. The
// held START_REPLICATION then reaches the server and takes the recovery's
// slot (the same name, inactive). The instance must give it back before
// streaming anything, say that it waits for the recovery, and stream only
// once the recovery is done.
//
// N.B. before the check once the slot is held
// (replication.Stream.CheckWhenHeld) the instance streamed the recovery's
// slot while the recovery still published older rows
// (TestRecoveryInProgressIsWaitedFor hit it by chance in a make test:
// "slot moved after it was read; starting from its confirmed position").
func TestRecoverySlotTakenAfterItsPrepare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, e2etest.CreatedAtDDL)
	w := &harness.Workload{Writers: 2, Aggregates: 20, MaxTxRows: 3, Pause: 5 * time.Millisecond, Pad: 2000}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	first := e.Start(t, "--recover-column", "created_at")
	first.WaitStreaming()
	px := harness.NewPGProxy(t, harness.PGHostPort(t, e.DSN))
	late := e.Start(t, "--recover-column", "created_at", "--pg-url", harness.DSNVia(t, e.DSN, px.Addr(), nil))
	harness.WaitFor(t, time.Minute, "the late instance to wait for the slot", func() bool {
		return strings.Contains(late.Log(), "waiting to take over") || late.Exited()
	})
	writing := w.Start(e.Env)
	defer func() { _ = writing.Stop() }()
	c.WaitFor(300, 2*time.Minute)
	e2etest.WaitMarkerCommitTime(t, e, time.Minute)

	held, release := px.HoldBefore(harness.PGStartReplication)
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatalf("the late instance sent no START_REPLICATION within a minute; log:\n%s", late.Log())
	}
	if code := first.Stop(time.Minute); code != 0 {
		t.Fatalf("first instance exit code %d, want 0; log:\n%s", code, first.Log())
	}
	e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, e.Slot)
	recovering := slowRecovery(t, e)
	release()
	const waitLine = "slot is being recovered from the outbox table by another walrelay"
	harness.WaitFor(t, time.Minute, "the late instance to say it waits for the recovery", func() bool {
		return strings.Contains(late.Log(), waitLine) || strings.Contains(late.Log(), `"msg":"streaming"`) || late.Exited() || recovering.Exited()
	})
	if strings.Contains(late.Log(), `"msg":"streaming"`) && !recovering.Exited() {
		t.Fatalf("the late instance streamed the slot while the recovery ran; log:\n%s", late.Log())
	}
	if code := recovering.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("walrelay recover exit code %d, want 0; output:\n%s", code, recovering.Log())
	}
	if !strings.Contains(late.Log(), waitLine) {
		t.Errorf("the late instance does not say %q; log:\n%s", waitLine, late.Log())
	}
	harness.WaitFor(t, 2*time.Minute, "the late instance to stream from the recovered slot", func() bool {
		return strings.Contains(late.Log(), `"msg":"streaming"`) || late.Exited()
	})
	writeOnThenSettle(t, e, w, writing, w.Committed()+300, late.Exited)
	rows := e.CommittedRows(t)
	recs := c.ToEnd()
	v, recovered := e2etest.CheckRecovered(t, recs, rows, w.RolledBack(), "recover")
	t.Logf("FIGURES events=%d records=%d recovered=%d duplicates=%d lost=%d order_violations=%d",
		len(rows), len(recs), recovered, v.Duplicates, v.Lost, v.OrderViolations)
	if code := late.Stop(time.Minute); code != 0 {
		t.Errorf("late instance exit code %d, want 0; log:\n%s", code, late.Log())
	}
}
