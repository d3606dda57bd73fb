package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestQuietWalsenderWithinTimeout: a walsender that sends nothing, not even a
// reply to walrelay's status updates asking for one, for longer than four
// status intervals but within the server's wal_sender_timeout (it is
// decoding a large transaction of other tables, say; here it is stopped
// with SIGSTOP) is waited for: the same connection streams on once it
// answers, without a restart.
func TestQuietWalsenderWithinTimeout(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	// N.B. set on the database, as a DBA may (the bed's server has 60s):
	// walrelay must read what applies to its own connection. RunArgs sets
	// --status-interval 1s: four intervals are far below it.
	e.Bed.Exec(t, e.DSN, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET wal_sender_timeout = %L', current_database(), '45s'); END $$`)
	var wst string
	if err := e.Bed.QueryRow(t, e.DSN, `SHOW wal_sender_timeout`).Scan(&wst); err != nil || wst != "45s" {
		t.Fatalf("wal_sender_timeout = %q, %v; want the database's 45s", wst, err)
	}
	relay := e.Start(t)
	relay.WaitStreaming()
	c := e.Collect(t)
	insert := func(n int) {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', jsonb_build_object('n', $3::int))`, harness.NewUUID(), e.AggType(0), n)
	}
	insert(1)
	c.WaitFor(1, time.Minute)

	pid := e.Walsender(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop walsender %d: %v", pid, err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("resume walsender %d: %v", pid, err)
			}
		}
	}
	t.Cleanup(resume)
	const quiet = `"msg":"no message from PostgreSQL for four status intervals`
	harness.WaitFor(t, time.Minute, "walrelay to log four quiet status intervals", func() bool {
		log := relay.Log()
		if i := strings.Index(log, "restarting from the last confirmed position"); i >= 0 {
			resume()
			t.Fatalf("walrelay took the connection for dead within wal_sender_timeout %s and restarted:\n%.800s", wst, log[i:])
		}
		if relay.Exited() {
			t.Fatalf("walrelay exited: %v", relay.Err())
		}
		return strings.Contains(log, quiet)
	})
	resume()
	if !strings.Contains(relay.Log(), `"wal_sender_timeout":"45s"`) {
		t.Errorf("walrelay's warning does not name the database's wal_sender_timeout 45s as its limit:\n%.2000s", relay.Log())
	}
	insert(2)
	c.WaitFor(2, time.Minute)
	if got := e.Walsender(t); got != pid {
		t.Errorf("walsender %d streams the slot, want %d, the one stopped: walrelay reconnected", got, pid)
	}
	if v, _ := relay.MetricOK("walrelay_restarts_total"); v != 0 {
		t.Errorf("walrelay_restarts_total = %v, want 0", v)
	}
}
