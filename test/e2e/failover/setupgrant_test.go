package failover

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestSetupRoleSyncsAtOnce: on a PostgreSQL 17 pair, `walrelay setup
// --role` creates the least-privilege role and the failover slot and
// grants the role pg_log_standby_snapshot(); the standby's grant of
// pg_reload_conf() is run on the primary as docs/failover.md says (setup
// prints it as a note). walrelay run as that role, on both the primary
// and --pg-standby-url, makes the standby's copy of the slot synchronized
// by its own records and wakes, without a warning that it cannot (the
// slow path: the copy waits for the server's own record, every 15 s at
// most while it writes); every event inserted is then read back.
func TestSetupRoleSyncsAtOnce(t *testing.T) {
	t.Parallel()
	pair := testbed.StartPGPair(t, "17")
	e := failoverEnv(t, pair)
	role, password := "wr_"+e.Prefix, "pw-"+e.Prefix
	code, out := e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=" + password}, "setup", "--role", role,
		"--pg-url", e.DSN, "--brokers", strings.Join(e.Bed.Brokers(), ","), "--slot", e.Slot, "--publication", e.Pub)
	if code != 0 {
		t.Fatalf("setup: exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		`done:   GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO "` + role + `"`,
		`note:   with --pg-standby-url`, `GRANT EXECUTE ON FUNCTION pg_reload_conf() TO "` + role + `"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("setup does not say %q:\n%s", want, out)
		}
	}
	var failover bool
	if err := e.Bed.QueryRow(t, pair.PrimaryURL("failover"), `SELECT failover FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&failover); err != nil || !failover {
		t.Fatalf("setup's slot %s: failover %v (%v), want a failover slot", e.Slot, failover, err)
	}
	// N.B. the standby's grant, as docs/failover.md says: on the primary.
	e.Bed.Exec(t, pair.PrimaryURL("failover"), `GRANT EXECUTE ON FUNCTION pg_reload_conf() TO `+role)
	pair.WaitReplayed(t)

	roleEnv := *e
	base := *e.Env
	roleEnv.Env = &base
	roleEnv.DSN = e2etest.WithUser(t, e.DSN, role, password)
	standbyURL := e2etest.WithUser(t, pair.StandbyURL("failover"), role, password)
	c := e.Collect(t)
	relay := roleEnv.StartEnv(t, []string{"WALRELAY_PG_STANDBY_URL=" + standbyURL}, "--create=false")
	relay.WaitStreaming()
	streaming := time.Now()
	const ready = `"msg":"failover ready: the standby holds a synchronized copy of the slot"`
	slow := []string{"cannot log a running-transactions record", "cannot wake the standby's slot sync worker"}
	harness.WaitFor(t, 2*time.Minute, "walrelay to say the standby's copy is ready, or that it cannot make it so", func() bool {
		l := relay.Log()
		return strings.Contains(l, ready) || strings.Contains(l, slow[0]) || strings.Contains(l, slow[1]) || relay.Exited()
	})
	took := time.Since(streaming)
	for _, w := range slow {
		if strings.Contains(relay.Log(), w) {
			t.Errorf("walrelay as setup's role warns %q: the copy waits for the slow path; log:\n%s", w, relay.Log())
		}
	}
	if !strings.Contains(relay.Log(), ready) {
		t.Fatalf("walrelay as setup's role does not say the standby's copy is ready; log:\n%s", relay.Log())
	}
	// N.B. the truth is the standby's pg_replication_slots, read as the
	// bed's superuser.
	if ok, lsn := standbySlot(t, e, pair.StandbyURL("failover")); !ok {
		t.Errorf("walrelay says failover ready, but the standby's copy is not (confirmed %q)", lsn)
	}
	if v, ok := relay.MetricOK("walrelay_failover_ready"); !ok || v != 1 {
		t.Errorf("walrelay_failover_ready = %v (exported %v), want 1", v, ok)
	}
	t.Logf("FIGURES streaming_to_failover_ready_logged=%s", took.Round(time.Millisecond))

	w := &harness.Workload{Writers: 1, Aggregates: 5, MaxTxRows: 2, Pause: time.Millisecond}
	w.Prepare(t, e.Env)
	writing := w.Start(e.Env)
	harness.WaitFor(t, time.Minute, "the writer to commit 100 events", func() bool { return w.Committed() >= 100 })
	if err := writing.Stop(); err != nil {
		t.Fatal(err)
	}
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "the slot to be confirmed past the last commit", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
	e2etest.CheckRecords(t, e, c.ToEnd(), e.CommittedRows(t), w.RolledBack(), 3, false)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
