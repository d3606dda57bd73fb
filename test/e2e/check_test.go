package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestCheckStatusAndSetup: setup creates a least-privilege role, the
// publication and the slot; walrelay streams as that role; check passes;
// status shows the slot; each fails clearly when things are missing.
func TestCheckStatusAndSetup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	role := "wr_" + e.Prefix
	t.Cleanup(func() { e.Bed.Exec(t, e.DSN, `DROP OWNED BY `+role+` CASCADE; DROP ROLE IF EXISTS `+role) })
	flags := []string{"--pg-url", e.DSN, "--brokers", strings.Join(e.Bed.Brokers(), ","), "--slot", e.Slot, "--publication", e.Pub}

	code, out := e2etest.RunOnce(t, nil, append([]string{"check"}, flags...)...)
	if code != 0 || !strings.Contains(out, "will be created at start") {
		t.Errorf("check before setup: exit %d, want 0 with notes that the slot will be created:\n%s", code, out)
	}
	code, out = e2etest.RunOnce(t, nil, append([]string{"check", "--create=false"}, flags...)...)
	if code != 2 || !strings.Contains(out, "FAIL  publication") || !strings.Contains(out, "FAIL  replication slot") {
		t.Errorf("check with --create=false: exit %d, want 2 with FAIL lines:\n%s", code, out)
	}
	code, out = e2etest.RunOnce(t, nil, append([]string{"status"}, flags...)...)
	if code != 2 || !strings.Contains(out, "does not exist") {
		t.Errorf("status without a slot: exit %d, want 2:\n%s", code, out)
	}
	code, out = e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=pw-" + e.Prefix}, append([]string{"setup", "--role", role}, flags...)...)
	if code != 0 || !strings.Contains(out, "done:   CREATE ROLE") || !strings.Contains(out, "hostssl    ") || strings.Contains(out, "pw-"+e.Prefix) {
		t.Fatalf("setup: exit %d:\n%s", code, out)
	}
	var super, repl bool
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT rolsuper, rolreplication FROM pg_roles WHERE rolname = $1`, role).Scan(&super, &repl); err != nil {
		t.Fatal(err)
	}
	if super || !repl {
		t.Errorf("role %s: superuser %v, replication %v; want a non-superuser with REPLICATION", role, super, repl)
	}
	// Stream as the least-privilege role.
	roleEnv := *e
	roleEnvBase := *e.Env // its own DSN, not e's
	roleEnv.Env = &roleEnvBase
	roleEnv.DSN = e2etest.WithUser(t, e.DSN, role, "pw-"+e.Prefix)
	c := e.Collect(t)
	relay := roleEnv.Start(t, "--create=false")
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)
	code, out = e2etest.RunOnce(t, nil, append([]string{"check", "--pg-url", roleEnv.DSN}, flags[2:]...)...)
	if code != 0 || !strings.Contains(out, "checks passed") || strings.Contains(out, "FAIL") {
		t.Errorf("check as the role: exit %d:\n%s", code, out)
	}
	code, out = e2etest.RunOnce(t, nil, append([]string{"status"}, flags...)...)
	if code != 0 || !strings.Contains(out, "active                 yes") || !strings.Contains(out, "publication            "+e.Pub+": public.outbox") {
		t.Errorf("status: exit %d:\n%s", code, out)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// TestCheckSkipsWhatDependsOnAFailedCheck: with the outbox table missing,
// `walrelay check` fails the table check and says the column check was
// skipped, rather than passing it.
func TestCheckSkipsWhatDependsOnAFailedCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	flags := []string{"--pg-url", e.DSN, "--brokers", strings.Join(e.Bed.Brokers(), ","), "--slot", e.Slot, "--publication", e.Pub,
		"--table", "public.no_such_outbox_" + e.Prefix}
	code, out := e2etest.RunOnce(t, nil, append([]string{"check"}, flags...)...)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(out, "FAIL  outbox tables exist: outbox table public.no_such_outbox_"+e.Prefix+" does not exist") {
		t.Errorf("no FAIL line for the missing table:\n%s", out)
	}
	if !strings.Contains(out, `SKIP  outbox columns: not checked, because "outbox tables exist" failed`) || strings.Contains(out, "PASS  outbox columns") {
		t.Errorf("the column check is not reported as skipped:\n%s", out)
	}
	if !strings.Contains(out, `SKIP  publication: not checked, because "outbox tables exist" failed`) {
		t.Errorf("the publication check is not reported as skipped:\n%s", out)
	}
	if !strings.Contains(out, "checks failed, 2 skipped") {
		t.Errorf("the summary does not count the skipped check:\n%s", out)
	}
}
