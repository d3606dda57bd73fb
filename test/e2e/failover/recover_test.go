package failover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestRecoverAfterFailover: PostgreSQL 15 (no failover slots), writers
// committing, the primary killed and the standby promoted: walrelay exits
// 3. `walrelay recover` is killed (-9) in the middle, after it created the
// new slot and before it read the outbox (its read waits on a lock the
// test holds); walrelay run then refuses that slot (exit 2, saying to
// recover again); `walrelay recover` again drops it and recovers; walrelay
// streams from the new slot while the writers go on. Every row the
// promoted server's outbox holds is in Kafka (lost 0, phantom 0, per
// aggregate in commit order); duplicates are reported.
func TestRecoverAfterFailover(t *testing.T) {
	t.Parallel()
	recoverAfterFailover(t, false)
}

// TestRecoverMissingSlotAutomatically: the same failover with walrelay run
// --recover-missing-slot: walrelay does not exit, recovers from the outbox
// table by itself and streams on; lost 0.
func TestRecoverMissingSlotAutomatically(t *testing.T) {
	t.Parallel()
	recoverAfterFailover(t, true)
}

func recoverAfterFailover(t *testing.T, auto bool) {
	pair := testbed.StartPGPair(t, "15")
	e := failoverEnv(t, pair)
	e.Bed.Exec(t, pair.PrimaryURL("failover"), e2etest.CreatedAtDDL)
	pair.WaitReplayed(t)
	args := []string{"--recover-column", "created_at"}
	if auto {
		args = append(args, "--recover-missing-slot")
	}
	w := &harness.Workload{Writers: 2, Aggregates: 20, MaxTxRows: 3, Rollback: 0.1, Pause: 5 * time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t, args...)
	relay.WaitStreaming()
	writing := w.Start(e.Env)
	defer func() { _ = writing.Stop() }()
	c.WaitFor(300, 2*time.Minute)
	marker := e2etest.WaitMarkerCommitTime(t, e, time.Minute)
	t.Logf("marker before the failover: %s", marker)

	killed := time.Now()
	pair.KillPrimary(t)
	pair.Promote(t)
	before := w.Committed()
	var recovery string // the account
	if auto {
		harness.WaitFor(t, 3*time.Minute, "walrelay to recover and stream on the promoted server", func() bool {
			return strings.Contains(relay.Log(), "recover of slot "+e.Slot+": new slot created") && e.Walsender(t) != 0 || relay.Exited()
		})
		if relay.Exited() {
			t.Fatalf("walrelay --recover-missing-slot exited after the failover; log:\n%s", relay.Log())
		}
		recovery = relay.Log()
	} else {
		if code := relay.Wait(3 * time.Minute); code != 3 {
			t.Fatalf("walrelay exit code %d after the failover, want 3; log:\n%s", code, relay.Log())
		}
		// The writers go on on the promoted server, then stop: a writer's
		// open transaction would hold the recovery's slot creation behind
		// the lock below.
		harness.WaitFor(t, 2*time.Minute, "the writers to commit 100 events on the promoted server", func() bool {
			return w.Committed() >= before+100
		})
		if err := writing.Stop(); err != nil {
			t.Fatal(err)
		}
		recovery = killedRecovery(t, e)
		writing = w.Start(e.Env)
		relay = e.Start(t, args...)
		relay.WaitStreaming()
	}
	resumed := time.Since(killed)
	harness.WaitFor(t, 2*time.Minute, "the writers to commit 300 more events on the promoted server", func() bool {
		return w.Committed() >= before+300
	})
	if err := writing.Stop(); err != nil {
		t.Fatal(err)
	}
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, 2*time.Minute, "the new slot to be confirmed past the last commit", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
	// N.B. the truth is the promoted server's outbox table.
	rows := e.CommittedRows(t)
	recs := c.ToEnd()
	v, recovered := e2etest.CheckRecovered(t, recs, rows, w.RolledBack(), "recover")
	if recovered == 0 {
		t.Errorf("no record carries %s: recover", e2etest.RecoveredHeader)
	}
	for _, want := range []string{"rows chosen: created_at at or after", "rows read", "acknowledged by Kafka"} {
		if !strings.Contains(recovery, want) {
			t.Errorf("the recovery's account does not say %q:\n%s", want, recovery)
		}
	}
	t.Logf("FIGURES pg=15 auto=%v events=%d records=%d recovered=%d duplicates=%d lost=%d kill_to_streaming=%s",
		auto, len(rows), len(recs), recovered, v.Duplicates, v.Lost, resumed.Round(time.Millisecond))
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// killedRecovery runs `walrelay recover` and kills it (-9) in the middle:
// after it recorded the recovery on the state topic and while PostgreSQL
// creates its slot; checks that walrelay run then refuses the slot; runs
// `walrelay recover` to the end and returns its output.
//
// N.B. the order is forced, not raced: a transaction holding an xid keeps
// the slot's creation waiting (its consistent point waits for the
// transactions running when it began), and walrelay is killed then, the
// marker already saying the recovery is unfinished. PostgreSQL then either
// drops the half-made slot (the walsender sees its client gone) or
// finishes and keeps it, never streamed from: both are a crash in the
// middle, and the test says which it was.
func killedRecovery(t *testing.T, e *env) string {
	t.Helper()
	ctx := context.Background()
	holder := harness.Connect(t, e.DSN)
	defer holder.Close(ctx)
	for _, q := range []string{`BEGIN`, `SELECT txid_current()`} {
		if _, err := holder.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	args := e.Args("recover", "--recover-column", "created_at")
	first := harness.StartProcess(t, e.Bin, nil, args)
	harness.WaitFor(t, 2*time.Minute, "the recovery to begin creating its slot", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).Exists || first.Exited()
	})
	if first.Exited() {
		t.Fatalf("walrelay recover exited before creating its slot; output:\n%s", first.Log())
	}
	first.Kill()
	if _, err := holder.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 2*time.Minute, "the killed recovery's walsender to end", func() bool {
		return !e.Bed.Slot(t, e.DSN, e.Slot).Active
	})
	left := e.Bed.Slot(t, e.DSN, e.Slot).Exists
	t.Logf("after the kill the half-made slot was %s", map[bool]string{true: "kept by PostgreSQL", false: "dropped by PostgreSQL"}[left])
	// The slot of an unfinished recovery is never streamed from.
	run := e.Start(t, "--recover-column", "created_at")
	if code := run.Wait(time.Minute); code != 2 {
		t.Errorf("walrelay run on the slot of a killed recovery: exit %d, want 2; log:\n%s", code, run.Log())
	}
	for _, want := range []string{"recovery unfinished", "run `walrelay recover`"} {
		if !strings.Contains(run.Log(), want) {
			t.Errorf("walrelay run does not say %q; log:\n%s", want, run.Log())
		}
	}
	again := harness.StartProcess(t, e.Bin, nil, args)
	if code := again.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("walrelay recover after a killed one: exit %d, want 0; output:\n%s", code, again.Log())
	}
	if left && !strings.Contains(again.Log(), "dropping the slot of an unfinished recovery") {
		t.Errorf("walrelay recover does not say it dropped the killed recovery's slot:\n%s", again.Log())
	}
	t.Logf("walrelay recover:\n%s", again.Log())
	return again.Log()
}
