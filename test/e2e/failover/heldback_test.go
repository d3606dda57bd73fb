package failover

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestHeldBackStreamIsNotReady: a promoted PostgreSQL 17 server whose
// synchronized_standby_slots names a physical slot no standby streams from
// (the old primary's setting, kept after a failover). PostgreSQL holds
// every logical walsender of a failover slot back while its walsender
// still answers: walrelay turns not ready, saying why, with
// walrelay_stream_held_back at 1 and the fix in the log. Once the setting is
// fixed (ALTER SYSTEM, pg_reload_conf) walrelay is ready again and every
// committed event is in Kafka, read back to the end offsets.
func TestHeldBackStreamIsNotReady(t *testing.T) {
	t.Parallel()
	pair := testbed.StartPGPair(t, "17")
	e := failoverEnv(t, pair)
	e.Bin = relayBinary()
	pair.KillPrimary(t)
	pair.Promote(t)
	promoted := pair.StandbyURL("failover")
	e.Bed.Exec(t, promoted, `SELECT pg_create_physical_replication_slot('sb_phys', true)`)
	setStandbySlots(t, e, promoted, "sb_phys")

	w := &harness.Workload{Writers: 1, Aggregates: 10, MaxTxRows: 3, Rollback: 0.1, Pause: 5 * time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t, "--status-interval", "1s")
	relay.WaitStreaming()
	writing := w.Start(e.Env)
	defer writing.Stop()
	started := time.Now()
	var reason string
	harness.WaitFor(t, time.Minute, "walrelay to turn not ready because PostgreSQL holds its stream back", func() bool {
		code, body := relay.Get("/readyz")
		reason = body
		return code == http.StatusServiceUnavailable && strings.Contains(body, "synchronized_standby_slots")
	})
	detected := time.Since(started)
	// The premise: PostgreSQL did hold the stream back.
	if s := e.Bed.Slot(t, promoted, e.Slot); s.ConfirmedFlushLSN >= e.Bed.CurrentWALLSN(t, promoted) {
		t.Errorf("the slot is confirmed up to the server's WAL (%s): PostgreSQL did not hold the stream back", s.ConfirmedFlushLSN)
	}
	for _, want := range []string{`"sb_phys"`, "inactive"} {
		if !strings.Contains(reason, want) {
			t.Errorf("/readyz does not say %q: %s", want, reason)
		}
	}
	if v := relay.Metric("walrelay_stream_held_back"); v != 1 {
		t.Errorf("walrelay_stream_held_back = %v while held back, want 1", v)
	}
	for _, want := range []string{"PostgreSQL holds the stream back", "ALTER SYSTEM SET synchronized_standby_slots = ''", "docs/failover.md"} {
		if !strings.Contains(relay.Log(), want) {
			t.Errorf("walrelay's log does not say %q; log:\n%s", want, relay.Log())
		}
	}
	t.Logf("FIGURES not_ready_after=%s status_interval=1s committed_by_then=%d in_kafka_by_then=%d", detected.Round(time.Millisecond), w.Committed(), c.Len())

	// The fix the log names.
	setStandbySlots(t, e, promoted, "")
	harness.WaitFor(t, time.Minute, "walrelay to be ready again once the setting is fixed", func() bool {
		code, _ := relay.Get("/readyz")
		return code == http.StatusOK
	})
	if v := relay.Metric("walrelay_stream_held_back"); v != 0 {
		t.Errorf("walrelay_stream_held_back = %v after the fix, want 0", v)
	}
	before := w.Committed()
	harness.WaitFor(t, time.Minute, "the writers to commit 100 more events", func() bool { return w.Committed() >= before+100 })
	if err := writing.Stop(); err != nil {
		t.Fatal(err)
	}
	end := e.Bed.CurrentWALLSN(t, promoted)
	harness.WaitFor(t, 2*time.Minute, "the slot to be confirmed past the last commit", func() bool {
		return e.Bed.Slot(t, promoted, e.Slot).ConfirmedFlushLSN >= end
	})
	rows := e.CommittedRows(t)
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, w.RolledBack(), 3, false)
	if !strings.Contains(relay.Log(), "PostgreSQL no longer holds the stream back") {
		t.Errorf("walrelay did not log that the stream moves again; log:\n%s", relay.Log())
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// setStandbySlots sets synchronized_standby_slots on the server of url
// (ALTER SYSTEM, pg_reload_conf) and waits until a new session sees it.
func setStandbySlots(t *testing.T, e *env, url, slots string) {
	t.Helper()
	e.Bed.Exec(t, url, `ALTER SYSTEM SET synchronized_standby_slots = '`+slots+`'`)
	e.Bed.Exec(t, url, `SELECT pg_reload_conf()`)
	harness.WaitFor(t, 30*time.Second, "synchronized_standby_slots = '"+slots+"'", func() bool {
		var v string
		if err := e.Bed.QueryRow(t, url, `SELECT current_setting('synchronized_standby_slots')`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v == slots
	})
}
