package failover

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestRecoverMissingSlotTwoInstances: two walrelay run
// --recover-missing-slot on one slot (an active one streaming, a standby
// one waiting for the slot), writers committing, the primary killed and
// the standby server promoted: the slot is gone for both. Exactly one of
// them recovers from the outbox table and streams, the other waits for its
// recovery (docs/recovery.md, "Several instances"); neither exits; every
// row the promoted server's outbox holds is in Kafka (lost 0, phantom 0,
// per aggregate in commit order), duplicates and each instance's part
// reported.
//
// N.B. what serializes them is the recovery's lock in PostgreSQL
// (pgcatalog/recoverylock.go): CI failed this test before it, the waiting
// instance streaming the other's recovery's slot (315 events out of
// order). TestRecoveryInProgressIsWaitedFor forces that race.
func TestRecoverMissingSlotTwoInstances(t *testing.T) {
	t.Parallel()
	pair := testbed.StartPGPair(t, "15")
	e := failoverEnv(t, pair)
	e.Bed.Exec(t, pair.PrimaryURL("failover"), e2etest.CreatedAtDDL)
	pair.WaitReplayed(t)
	args := []string{"--recover-column", "created_at", "--recover-missing-slot"}
	w := &harness.Workload{Writers: 2, Aggregates: 20, MaxTxRows: 3, Rollback: 0.1, Pause: 5 * time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	first := e.Start(t, args...)
	first.WaitStreaming()
	second := e.Start(t, args...)
	relays := []*e2etest.Proc{first, second}
	writing := w.Start(e.Env)
	defer func() { _ = writing.Stop() }()
	c.WaitFor(300, 2*time.Minute)
	e2etest.WaitMarkerCommitTime(t, e, time.Minute)
	for i, r := range relays {
		if r.Exited() {
			t.Fatalf("instance %d exited before the failover; log:\n%s", i+1, r.Log())
		}
	}

	pair.KillPrimary(t)
	dead := time.Now() // every process of the old primary is gone
	pair.Promote(t)
	before := w.Committed()
	recovered := func() (n int) {
		for _, r := range relays {
			n += strings.Count(r.Log(), "recover of slot "+e.Slot+": new slot created")
		}
		return n
	}
	harness.WaitFor(t, 3*time.Minute, "an instance to recover and stream on the promoted server", func() bool {
		return recovered() > 0 && e.Walsender(t) != 0 || first.Exited() || second.Exited()
	})
	writeOnThenSettle(t, e, w, writing, before+300, func() bool { return first.Exited() || second.Exited() })
	for i, r := range relays {
		if r.Exited() {
			t.Errorf("instance %d exited (%v) after the failover; log:\n%s", i+1, r.Err(), r.Log())
		}
	}
	if n := recovered(); n != 1 {
		t.Errorf("%d recoveries of slot %s by the two instances, want 1; logs:\n%s\n----\n%s", n, e.Slot, first.Log(), second.Log())
	}
	rows := e.CommittedRows(t)
	recs, failoverLost := e2etest.WithoutFailoverLosses(c.ToEnd(), rows, w.RolledBack(), dead)
	v, fromTable := e2etest.CheckRecovered(t, recs, rows, w.RolledBack(), "recover")
	if fromTable == 0 {
		t.Errorf("no record carries %s: recover", e2etest.RecoveredHeader)
	}
	var roles []string
	for i, r := range relays {
		roles = append(roles, fmt.Sprintf("instance%d_recoveries=%d instance%d_waited_for_the_slot=%d", i+1,
			strings.Count(r.Log(), "recover of slot "+e.Slot+": new slot created"), i+1, strings.Count(r.Log(), "waiting to take over")))
	}
	t.Logf("FIGURES events=%d records=%d recovered=%d duplicates=%d lost=%d lost_by_the_failover_but_relayed=%d %s",
		len(rows), len(recs), fromTable, v.Duplicates, v.Lost, failoverLost, strings.Join(roles, " "))
	for i, r := range relays {
		if r.Exited() {
			continue
		}
		if code := r.Stop(time.Minute); code != 0 {
			t.Errorf("instance %d exit code %d, want 0", i+1, code)
		}
	}
}
