package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestDroppedSlotIsNotRecreated: a slot walrelay streamed from and that was
// dropped by hand is not created again at the next start: walrelay exits 3
// naming the slot, the system and the last confirmed position, and creates
// no slot, because a new slot would start after the event committed while
// the slot was gone; walrelay setup does not create it either.
// --recreate-missing-slot creates it, logging the gap.
func TestDroppedSlotIsNotRecreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "the slot to be confirmed past the first event", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exit code %d, want 0", code)
	}

	e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, e.Slot)
	lostID := harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 2}')`, lostID, e.AggType(0))

	again := e.Start(t)
	harness.WaitFor(t, time.Minute, "walrelay to exit or to stream a slot again", func() bool {
		return again.Exited() || e.Walsender(t) != 0
	})
	if !again.Exited() {
		t.Fatalf("walrelay streams again from a slot it created after the one it streamed from was dropped (slot %s exists: %v): the event committed while the slot was gone is skipped; log:\n%s",
			e.Slot, e.Bed.Slot(t, e.DSN, e.Slot).Exists, again.Log())
	}
	if code := again.Wait(time.Second); code != 3 {
		t.Errorf("walrelay exit code %d, want 3 (slot lost)", code)
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Exists {
		t.Errorf("slot %s exists after walrelay refused to re-create it", e.Slot)
	}
	for _, want := range []string{"replication slot gone", e.Slot, "--recreate-missing-slot"} {
		if !strings.Contains(again.Log(), want) {
			t.Errorf("walrelay's output does not say %q; log:\n%s", want, again.Log())
		}
	}

	// Nor does walrelay setup create it.
	if out, code := e2etest.RunCmd(t, e, "setup", "--role", ""); code != 3 || !strings.Contains(out, "replication slot gone") {
		t.Errorf("walrelay setup: exit %d, want 3 saying the slot is gone:\n%s", code, out)
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Exists {
		t.Errorf("walrelay setup created slot %s, which walrelay streamed from before it was dropped", e.Slot)
	}

	// Accepting the gap: the slot is created again, the gap logged, and
	// the events committed from then on are relayed.
	recreated := e.Start(t, "--recreate-missing-slot")
	recreated.WaitStreaming()
	if !strings.Contains(recreated.Log(), "gap") {
		t.Errorf("walrelay --recreate-missing-slot did not log the gap; log:\n%s", recreated.Log())
	}
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 3}')`, harness.NewUUID(), e.AggType(0))
	recs := c.WaitFor(2, time.Minute)
	for _, r := range recs {
		if id, _ := harness.Header(r, "id"); id == lostID {
			t.Errorf("the event committed while the slot was gone reached Kafka: the test's premise (a new slot starts after it) does not hold")
		}
	}
	if code := recreated.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// TestSlotFailoverFlag: --slot-failover=true on a server without failover
// slots (before 17) stops with exit 2 naming the version; on 17+ the slot
// is created as a failover slot (pg_replication_slots.failover).
func TestSlotFailoverFlag(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var num int
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT current_setting('server_version_num')::int`).Scan(&num); err != nil {
		t.Fatal(err)
	}
	relay := e.Start(t, "--slot-failover=true")
	if num < 170000 {
		if code := relay.Wait(time.Minute); code != 2 {
			t.Errorf("exit code %d on PostgreSQL %d, want 2", code, num)
		}
		if want := "has no failover slots"; !strings.Contains(relay.Log(), want) {
			t.Errorf("walrelay's output lacks %q; log:\n%s", want, relay.Log())
		}
		if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
			t.Errorf("walrelay created slot %s", e.Slot)
		}
		return
	}
	relay.WaitStreaming()
	var failover bool
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT failover FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&failover); err != nil {
		t.Fatal(err)
	}
	if !failover {
		t.Errorf("slot %s is not a failover slot", e.Slot)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
