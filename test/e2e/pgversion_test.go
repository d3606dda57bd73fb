package e2e

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestUnsupportedPostgresRefused: against a real PostgreSQL 13 (fetched by
// the test bed) `walrelay run` exits 2 naming the version and the fix,
// before it creates a publication or a slot, and `walrelay check` fails the
// version check.
func TestUnsupportedPostgresRefused(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t) // its Kafka
	dsn := testbed.StartForTest(t, testbed.Options{PG: true, PGVersion: "13"}).PGURL()
	b.Exec(t, dsn, harness.OutboxDDL)
	var version string
	if err := b.QueryRow(t, dsn, "SELECT current_setting('server_version')").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "13.") {
		t.Fatalf("server_version %q, want a PostgreSQL 13 server", version)
	}
	args := []string{"--pg-url", dsn, "--brokers", strings.Join(b.Brokers(), ","), "--slot", "s_" + harness.Uniq(), "--publication", "walrelay", "--http-addr", ""}

	code, out := e2etest.RunOnce(t, nil, append([]string{"run"}, args...)...)
	want := "PostgreSQL " + version + " is not supported: walrelay needs PostgreSQL 14 or later"
	if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, "upgrade the server") {
		t.Errorf("run: exit %d, want 2 with %q and the fix; output:\n%s", code, want, out)
	}
	var slots, pubs int
	if err := b.QueryRow(t, dsn, "SELECT (SELECT count(*) FROM pg_replication_slots), (SELECT count(*) FROM pg_publication)").Scan(&slots, &pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Errorf("the refused start left %d slots and %d publications on the server", slots, pubs)
	}

	code, out = e2etest.RunOnce(t, nil, append([]string{"check"}, args...)...)
	if code != 2 || !strings.Contains(out, "FAIL  server version is supported") {
		t.Errorf("check: exit %d, want 2 with a FAIL line for the server version; output:\n%s", code, out)
	}
}
