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
// 3. `walrelay recover` is killed (-9) while its slot is created, then
// stopped by a row it cannot publish after it created the slot and read
// the outbox (killedRecovery); after each walrelay run refuses the slot
// (exit 2, saying to recover again); `walrelay recover` again drops it and
// recovers; walrelay streams from the new slot. The writers commit throughout. Every row the
// promoted server's outbox holds is in Kafka (lost 0, phantom 0, per
// aggregate in commit order); duplicates are reported.
func TestRecoverAfterFailover(t *testing.T) {
	t.Parallel()
	recoverAfterFailover(t, "15", false)
}

// TestRecoverMissingSlotAutomatically: the same failover with walrelay run
// --recover-missing-slot: walrelay does not exit, recovers from the outbox
// table by itself and streams on; lost 0.
func TestRecoverMissingSlotAutomatically(t *testing.T) {
	t.Parallel()
	recoverAfterFailover(t, "15", true)
}

// TestRecoverUnsynchronizedSlotOn17: PostgreSQL 17 with a failover slot
// that the standby has not synchronized yet (its slot synchronization is
// off before walrelay creates the slot): after the failover the slot is
// gone as on 15, and run --recover-missing-slot recovers; lost 0.
func TestRecoverUnsynchronizedSlotOn17(t *testing.T) {
	t.Parallel()
	recoverAfterFailover(t, "17", true)
}

func recoverAfterFailover(t *testing.T, major string, auto bool) {
	pair := testbed.StartPGPair(t, major)
	if major != "15" {
		pair.StopSlotSync(t)
	}
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

	if major != "15" {
		if _, copied := standbySlot(t, e, pair.StandbyURL("failover")); copied != "" {
			t.Fatalf("the standby holds a copy of slot %s at %s: the failover would not lose it", e.Slot, copied)
		}
	}
	killed := time.Now()
	pair.KillPrimary(t)
	dead := time.Now() // every process of the old primary is gone
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
		harness.WaitFor(t, 2*time.Minute, "the writers to commit 100 events on the promoted server", func() bool {
			return w.Committed() >= before+100
		})
		recovery = killedRecovery(t, e)
		relay = e.Start(t, args...)
		relay.WaitStreamingLogged()
	}
	resumed := time.Since(killed)
	writeOnThenSettle(t, e, w, writing, before+300, nil)
	// N.B. the truth is the promoted server's outbox table.
	rows := e.CommittedRows(t)
	// N.B. what the old primary committed but never sent its standby is
	// gone from the promoted server, and may be in Kafka already.
	recs, failoverLost := e2etest.WithoutFailoverLosses(c.ToEnd(), rows, w.RolledBack(), dead)
	v, recovered := e2etest.CheckRecovered(t, recs, rows, w.RolledBack(), "recover")
	if recovered == 0 {
		t.Errorf("no record carries %s: recover", e2etest.RecoveredHeader)
	}
	for _, want := range []string{"rows chosen: created_at at or after", "rows read", "acknowledged by Kafka"} {
		if !strings.Contains(recovery, want) {
			t.Errorf("the recovery's account does not say %q:\n%s", want, recovery)
		}
	}
	t.Logf("FIGURES pg=%s auto=%v events=%d records=%d recovered=%d duplicates=%d lost=%d lost_by_the_failover_but_relayed=%d kill_to_streaming=%s",
		major, auto, len(rows), len(recs), recovered, v.Duplicates, v.Lost, failoverLost, resumed.Round(time.Millisecond))
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// killedRecovery interrupts `walrelay recover` twice, then runs it to the
// end and returns its output:
//
//   - kill -9 while PostgreSQL creates its slot, after the recovery was
//     recorded on the state topic. N.B. forced, not raced: a transaction
//     holding an xid keeps the slot's creation waiting (its consistent point
//     waits for the transactions running when it began);
//   - a row it cannot publish (an empty key) with --on-poison halt: it stops
//     (exit 1) after it created the slot, read the outbox and produced the
//     rows before that one, saying it did not finish.
//
// After each, walrelay run refuses the slot (exit 2, saying to recover
// again); the last recovery drops the slot the second one left.
func killedRecovery(t *testing.T, e *env) string {
	t.Helper()
	ctx := context.Background()
	args := e.Args("recover", "--recover-column", "created_at")
	refused := func(when string) {
		run := e.Start(t, "--recover-column", "created_at")
		if code := run.Wait(time.Minute); code != 2 {
			t.Errorf("walrelay run %s: exit %d, want 2; log:\n%s", when, code, run.Log())
		}
		for _, want := range []string{"recovery unfinished", "run `walrelay recover`"} {
			if !strings.Contains(run.Log(), want) {
				t.Errorf("walrelay run %s does not say %q; log:\n%s", when, want, run.Log())
			}
		}
	}

	holder := harness.Connect(t, e.DSN)
	defer holder.Close(ctx)
	for _, q := range []string{`BEGIN`, `SELECT txid_current()`} {
		if _, err := holder.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
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
	t.Logf("after the kill -9 the half-made slot was %s", map[bool]string{true: "kept by PostgreSQL", false: "dropped by PostgreSQL"}[e.Bed.Slot(t, e.DSN, e.Slot).Exists])
	refused("after a killed recovery")

	poison := harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, '', 'T', '{}')`, poison, e.AggType(0))
	second := harness.StartProcess(t, e.Bin, nil, append(args, "--on-poison", "halt"))
	if code := second.Wait(3 * time.Minute); code != 1 {
		t.Fatalf("walrelay recover --on-poison halt with a row it cannot publish: exit %d, want 1; output:\n%s", code, second.Log())
	}
	if !strings.Contains(second.Log(), "NOT FINISHED") {
		t.Errorf("the halted recovery does not say it did not finish:\n%s", second.Log())
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); !s.Exists || s.ConfirmedFlushLSN == 0 {
		t.Fatalf("the halted recovery left no slot %s: %+v", e.Slot, s)
	}
	refused("after a halted recovery")
	e.Bed.Exec(t, e.DSN, `DELETE FROM outbox WHERE id = $1`, poison)

	again := harness.StartProcess(t, e.Bin, nil, args)
	if code := again.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("walrelay recover after interrupted ones: exit %d, want 0; output:\n%s", code, again.Log())
	}
	if !strings.Contains(again.Log(), "dropping the slot of an unfinished recovery") {
		t.Errorf("walrelay recover does not say it dropped the halted recovery's slot:\n%s", again.Log())
	}
	t.Logf("walrelay recover:\n%s", again.Log())
	return again.Log()
}
