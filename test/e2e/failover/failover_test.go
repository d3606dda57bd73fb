package failover

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// failoverEnv is a test's database on a primary and standby pair
// (testbed.StartPGPair), walrelay and the writers on the multi-host URL,
// and the bed's Kafka.
func failoverEnv(t *testing.T, pair *testbed.PGPair) *env {
	t.Helper()
	const db = "failover"
	bed := testbed.Get(t)
	bed.Exec(t, pair.PrimaryURL("postgres"), "CREATE DATABASE "+db)
	bed.Exec(t, pair.PrimaryURL(db), harness.OutboxDDL)
	pair.WaitReplayed(t)
	return &env{Env: &harness.Env{Bed: bed, Bin: relayBin, DSN: pair.URL(db),
		Slot: "s_" + harness.Uniq(), Pub: "p_" + harness.Uniq(), Prefix: "t" + harness.Uniq()}}
}

// standbySlot reads the slot on the standby: whether it is there
// synchronized and ready for a promotion (synced, not temporary, valid).
func standbySlot(t *testing.T, e *env, url string) (ready bool, confirmed string) {
	t.Helper()
	err := e.Bed.QueryRow(t, url, `SELECT synced AND NOT temporary AND invalidation_reason IS NULL AND confirmed_flush_lsn IS NOT NULL,
		coalesce(confirmed_flush_lsn::text, '') FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&ready, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ""
	}
	if err != nil {
		t.Fatalf("read the slot on the standby: %v", err)
	}
	return ready, confirmed
}

// TestFailoverToStandbyLosesNothing: PostgreSQL 17 with a physical standby
// that synchronizes failover slots, writers committing, walrelay streaming
// on the multi-host URL. The primary is killed (SIGKILL to the server), the
// standby promoted, the writers go on on it: walrelay resumes from the
// synchronized slot without creating one, and every transaction the new
// primary has is in Kafka (lost 0, phantom 0, per-key order).
func TestFailoverToStandbyLosesNothing(t *testing.T) {
	t.Parallel()
	failover(t, false)
}

// TestFailoverFromLaggingSyncedSlot: the same failover when the standby's
// copy of the slot is behind what walrelay confirmed on the primary (slot
// synchronization is turned off on the standby while walrelay goes on
// confirming): walrelay resumes from the synchronized
// position, logs the distance, and loses nothing; the events in between
// come again as duplicates.
func TestFailoverFromLaggingSyncedSlot(t *testing.T) {
	t.Parallel()
	failover(t, true)
}

func failover(t *testing.T, lagging bool) {
	pair := testbed.StartPGPair(t, "17")
	e := failoverEnv(t, pair)
	standbyURL := pair.StandbyURL("failover")
	w := &harness.Workload{Writers: 2, Aggregates: 20, MaxTxRows: 3, Rollback: 0.1, Pause: 5 * time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	writing := w.Start(e.Env)
	defer writing.Stop()
	harness.WaitFor(t, 2*time.Minute, "the slot to be synchronized to the standby", func() bool {
		ready, _ := standbySlot(t, e, standbyURL)
		return ready
	})

	// check and status say the failover is covered.
	out, code := e2etest.RunCmd(t, e, "check", "--pg-standby-url", standbyURL)
	for _, want := range []string{"PASS  failover readiness: failover slot; synchronized_standby_slots = " + testbed.StandbySlot, "PASS  standby has the slot synchronized: synced"} {
		if !strings.Contains(out, want) {
			t.Errorf("walrelay check (exit %d) does not say %q:\n%s", code, want, out)
		}
	}
	out, _ = e2etest.RunCmd(t, e, "status", "--pg-standby-url", standbyURL)
	for _, want := range []string{"failover               yes", "standby                synced"} {
		if !strings.Contains(out, want) {
			t.Errorf("walrelay status does not say %q:\n%s", want, out)
		}
	}

	c.WaitFor(300, 2*time.Minute)
	if lagging {
		// N.B. the standby still receives and flushes WAL (the primary's
		// synchronized_standby_slots is satisfied) and keeps the slot, at
		// the position last synchronized.
		pair.StopSlotSync(t)
		_, s := standbySlot(t, e, standbyURL)
		paused, err := pglogrepl.ParseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		harness.WaitFor(t, time.Minute, "walrelay to confirm past the standby's copy of the slot", func() bool {
			return e.Bed.Slot(t, pair.PrimaryURL("failover"), e.Slot).ConfirmedFlushLSN > paused
		})
		// N.B. walrelay refreshes its marker every 5 s: one refresh
		// past the standby's copy.
		time.Sleep(6 * time.Second)
	}
	_, syncedAt := standbySlot(t, e, standbyURL)
	killed := time.Now()
	pair.KillPrimary(t)
	pair.Promote(t)
	promoted := time.Since(killed)
	relay.WaitStreaming()
	resumed := time.Since(killed)
	if relay.Exited() {
		t.Fatalf("walrelay exited after the failover: %v", relay.Err())
	}
	// The writers go on on the new primary.
	writeOnThenSettle(t, e, w, writing, w.Committed()+300, nil)
	rows := e.CommittedRows(t)
	v := e2etest.CheckRecords(t, e, c.ToEnd(), rows, w.RolledBack(), 3, true)
	if n := strings.Count(relay.Log(), `"msg":"created replication slot"`); n != 1 {
		t.Errorf("walrelay created the slot %d times, want once (before the failover)", n)
	}
	behind := strings.Contains(relay.Log(), "the slot is behind the position walrelay confirmed on it before")
	if lagging && !behind {
		t.Errorf("walrelay resumed from a synchronized slot behind its marker without logging the distance; log:\n%s", relay.Log())
	}
	if lagging && v.Duplicates == 0 {
		t.Errorf("no duplicates after resuming from a synchronized slot behind what walrelay confirmed: the events in between were skipped or the slot was not behind")
	}
	t.Logf("FIGURES pg=%s lagging=%v events=%d duplicates=%d kill_to_promoted=%s kill_to_streaming=%s standby_slot_at_kill=%s logged_behind=%v",
		pair.Standby.Version, lagging, len(rows), v.Duplicates, promoted.Round(time.Millisecond), resumed.Round(time.Millisecond), syncedAt, behind)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// TestFailoverWithoutFailoverSlotsStops: the same failover on PostgreSQL 15,
// which has no failover slots: the promoted standby has no slot, and
// walrelay stops with exit code 3 saying so instead of creating a new slot
// there (which would skip what was committed since its last confirmation).
func TestFailoverWithoutFailoverSlotsStops(t *testing.T) {
	t.Parallel()
	pair := testbed.StartPGPair(t, "15")
	e := failoverEnv(t, pair)
	w := &harness.Workload{Writers: 1, Aggregates: 10, MaxTxRows: 3, Pause: 5 * time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	writing := w.Start(e.Env)
	defer writing.Stop()
	c.WaitFor(100, 2*time.Minute)

	// check says a failover loses the slot.
	out, _ := e2etest.RunCmd(t, e, "check")
	if !strings.Contains(out, "failover readiness: not protected: PostgreSQL 15 has no failover slots") {
		t.Errorf("walrelay check does not say that a failover loses the slot:\n%s", out)
	}

	pair.KillPrimary(t)
	pair.Promote(t)
	harness.WaitFor(t, 2*time.Minute, "walrelay to exit or to stream on the promoted standby", func() bool {
		return relay.Exited() || e.Walsender(t) != 0
	})
	if !relay.Exited() {
		t.Fatalf("walrelay streams on the promoted standby from a slot it created there (exists: %v): every event committed since its last confirmation on the old primary is skipped; log:\n%s",
			e.Bed.Slot(t, e.DSN, e.Slot).Exists, relay.Log())
	}
	if code := relay.Wait(time.Second); code != 3 {
		t.Errorf("walrelay exit code %d, want 3", code)
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Exists {
		t.Errorf("slot %s exists on the promoted standby after walrelay stopped", e.Slot)
	}
	for _, want := range []string{"replication slot gone", "failed over", "--recreate-missing-slot"} {
		if !strings.Contains(relay.Log(), want) {
			t.Errorf("walrelay's output does not say %q; log:\n%s", want, relay.Log())
		}
	}
	// A new walrelay (nothing in memory) finds the marker in Kafka.
	again := e.Start(t)
	if code := again.Wait(2 * time.Minute); code != 3 {
		t.Errorf("a new walrelay: exit code %d, want 3; log:\n%s", code, again.Log())
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Exists {
		t.Errorf("slot %s exists on the promoted standby after a new walrelay started", e.Slot)
	}
}

// TestExistingSlotBecomesFailoverSlot: on PostgreSQL 17 an existing slot
// that is not a failover slot is made one (ALTER_REPLICATION_SLOT) before
// walrelay streams it; check says what it will do before; walrelay setup
// creates a failover slot.
func TestExistingSlotBecomesFailoverSlot(t *testing.T) {
	t.Parallel()
	pair := testbed.StartPGPair(t, "17")
	e := failoverEnv(t, pair)
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	out, _ := e2etest.RunCmd(t, e, "check")
	if want := "is not a failover slot: walrelay run makes it one before streaming (ALTER_REPLICATION_SLOT"; !strings.Contains(out, want) {
		t.Errorf("walrelay check does not say %q:\n%s", want, out)
	}
	relay := e.Start(t)
	relay.WaitStreaming()
	var failover bool
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT failover FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&failover); err != nil {
		t.Fatal(err)
	}
	if !failover {
		t.Errorf("slot %s is not a failover slot after walrelay started", e.Slot)
	}
	harness.WaitFor(t, 2*time.Minute, "the slot to be synchronized to the standby", func() bool {
		ready, _ := standbySlot(t, e, pair.StandbyURL("failover"))
		return ready
	})
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}

	// walrelay setup creates a failover slot too.
	other := "s_" + harness.Uniq()
	if out, code := e2etest.RunCmd(t, e, "setup", "--role", "", "--slot", other); code != 0 {
		t.Fatalf("walrelay setup: exit %d:\n%s", code, out)
	}
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT failover FROM pg_replication_slots WHERE slot_name = $1`, other).Scan(&failover); err != nil {
		t.Fatal(err)
	}
	if !failover {
		t.Errorf("walrelay setup created slot %s without failover", other)
	}
	e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, other)
}

// writeOnThenSettle waits until the writers of w have committed atLeast
// events in all (on the new primary), stops them, and waits until e's slot
// is confirmed past the last commit. quit (nil: none) ends both waits early:
// a walrelay exited, which the caller reports.
func writeOnThenSettle(t *testing.T, e *env, w *harness.Workload, writing *harness.Writing, atLeast int64, quit func() bool) {
	t.Helper()
	stopped := func() bool { return quit != nil && quit() }
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("the writers to commit %d events in all", atLeast), func() bool {
		return w.Committed() >= atLeast || stopped()
	})
	if err := writing.Stop(); err != nil {
		t.Fatal(err)
	}
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, 2*time.Minute, "the slot to be confirmed past the last commit", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end || stopped()
	})
}
