package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

func withDatabase(t *testing.T, dsn, db string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}

// TestFirstConnectionRefusedExits2: PostgreSQL refusing the role (SQLSTATE
// 28000) or the database (3D000) on walrelay's first connection is a
// configuration mistake: run, check, status and setup exit 2 and name the
// setting to fix, rather than retrying for ever. (A wrong password, 28P01,
// needs password authentication: TestSecureKafkaAndPostgres.)
func TestFirstConnectionRefusedExits2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	brokers := strings.Join(e.Bed.Brokers(), ",")
	cases := []struct {
		name, dsn string
		want      []string
	}{
		{"unknown role", e2etest.WithUser(t, e.DSN, "nosuchrole_"+e.Prefix, "pw"), []string{"SQLSTATE 28000", "fix the user in --pg-url (WALRELAY_PG_URL", `user "nosuchrole_` + e.Prefix + `"`}},
		{"unknown database", withDatabase(t, e.DSN, "nosuchdb_"+e.Prefix), []string{"SQLSTATE 3D000", "fix the database in --pg-url (WALRELAY_PG_URL", `database "nosuchdb_` + e.Prefix + `"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"run", "--pg-url", c.dsn, "--brokers", brokers, "--slot", e.Slot, "--publication", e.Pub, "--http-addr", ""},
				{"check", "--pg-url", c.dsn, "--brokers", brokers, "--slot", e.Slot, "--publication", e.Pub},
				{"status", "--pg-url", c.dsn, "--slot", e.Slot},
			} {
				code, out := e2etest.RunFor(t, 30*time.Second, nil, cmd...)
				if code != 2 {
					t.Errorf("%s: exit code %d, want 2; output:\n%s", cmd[0], code, out)
				}
				for _, want := range c.want {
					if !strings.Contains(out, want) {
						t.Errorf("%s: output lacks %q:\n%s", cmd[0], want, out)
					}
				}
				if strings.Contains(out, "restarting from the last confirmed position") {
					t.Errorf("%s: says it restarts from a confirmed position it never had:\n%s", cmd[0], out)
				}
			}
		})
	}
	if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
		t.Errorf("a refused start created slot %s", e.Slot)
	}
}

// TestPostgresUnreachableAtStartRetries: a host that refuses connections
// may be a server still starting (compose, Kubernetes): walrelay retries,
// says it never connected and which setting to check, and stops cleanly;
// it does not claim to restart from a confirmed position.
func TestPostgresUnreachableAtStartRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	relay := e.Start(t, "--pg-url", "postgres://postgres:hidden-pw@127.0.0.1:1/"+e.Database(t))
	const want = `"msg":"cannot connect to PostgreSQL, never connected yet: retrying; if it persists check --pg-url (WALRELAY_PG_URL)","connecting_to":"host 127.0.0.1 port 1, database`
	harness.WaitFor(t, 30*time.Second, "a log line saying walrelay never connected", func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited instead of retrying:\n%s", relay.Log())
		}
		return strings.Count(relay.Log(), want) >= 2
	})
	if strings.Contains(relay.Log(), "restarting from the last confirmed position") {
		t.Errorf("walrelay says it restarts from a confirmed position it never had")
	}
	if strings.Contains(relay.Log(), "hidden-pw") {
		t.Errorf("walrelay's log shows the password")
	}
	if strings.Contains(relay.Log(), `"backoff":`) && !strings.Contains(relay.Log(), `"backoff":"`) {
		t.Errorf("the backoff is logged without a unit")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// TestLoginRefusedAfterStreamingIsRetried: once walrelay has streamed, a
// login refused later (a role renamed, a password rotated on the server
// first) is retried, and streaming resumes once the login works again.
func TestLoginRefusedAfterStreamingIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	role, renamed := "wr_"+e.Prefix, "wr_"+e.Prefix+"_away"
	e.Bed.Exec(t, e.DSN, `CREATE ROLE `+role+` LOGIN REPLICATION; ALTER TABLE outbox OWNER TO `+role+`; GRANT CREATE ON DATABASE `+e.Database(t)+` TO `+role)
	t.Cleanup(func() { dropRoles(t, e, role, renamed) })
	c := e.Collect(t)
	relay := e.Start(t, "--pg-url", e2etest.WithUser(t, e.DSN, role, ""))
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)

	// The role goes away under walrelay: every reconnect is refused (28000).
	var oid uint32
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT oid FROM pg_roles WHERE rolname = $1`, role).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	e.Bed.Exec(t, e.DSN, `ALTER ROLE `+role+` RENAME TO `+renamed)
	e.Bed.Exec(t, e.DSN, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usesysid = $1`, oid)
	harness.WaitFor(t, time.Minute, "walrelay to log a refused login and retry", func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited (%v) after a refused login, though it had streamed", relay.Err())
		}
		for _, l := range strings.Split(relay.Log(), "\n") {
			if strings.Contains(l, "restarting from the last confirmed position") && strings.Contains(l, "SQLSTATE 28000") {
				return true
			}
		}
		return false
	})
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 2}')`, harness.NewUUID(), e.AggType(0))
	time.Sleep(2 * time.Second)
	if relay.Exited() {
		t.Fatalf("walrelay exited (%v) after a refused login, though it had streamed", relay.Err())
	}
	e.Bed.Exec(t, e.DSN, `ALTER ROLE `+renamed+` RENAME TO `+role)
	c.WaitFor(2, 2*time.Minute)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// dropRoles drops each role that exists, with what it owns in e's database.
func dropRoles(t *testing.T, e *env, roles ...string) {
	t.Helper()
	for _, r := range roles {
		e.Bed.Exec(t, e.DSN, `DO $$ BEGIN
			IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '`+r+`') THEN
				REASSIGN OWNED BY `+r+` TO CURRENT_USER; DROP OWNED BY `+r+`; DROP ROLE `+r+`;
			END IF; END $$`)
	}
}

// TestCheckPrivilegesForCreate: `check` fails, with the fix, a role that
// --create could not create the publication as (no CREATE on the database,
// not the tables' owner), and passes once it may; run refuses the same way
// before creating anything.
func TestCheckPrivilegesForCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	role := "wrp_" + e.Prefix
	db := e.Database(t)
	e.Bed.Exec(t, e.DSN, `CREATE ROLE `+role+` LOGIN REPLICATION; GRANT SELECT ON outbox TO `+role)
	t.Cleanup(func() { dropRoles(t, e, role) })
	dsn := e2etest.WithUser(t, e.DSN, role, "")
	brokers := strings.Join(e.Bed.Brokers(), ",")
	check := []string{"check", "--pg-url", dsn, "--brokers", brokers, "--slot", e.Slot, "--publication", e.Pub}

	code, out := e2etest.RunOnce(t, nil, check...)
	for _, want := range []string{"FAIL  publication: role \"" + role + "\" may not create publication", `the CREATE privilege on database "` + db + `"`, "ownership of outbox", "CREATE PUBLICATION", "--create=false"} {
		if !strings.Contains(out, want) {
			t.Errorf("check as a role without privileges: output lacks %q:\n%s", want, out)
		}
	}
	if code != 2 {
		t.Errorf("check as a role without privileges: exit %d, want 2:\n%s", code, out)
	}
	code, out = e2etest.RunOnce(t, nil, "run", "--pg-url", dsn, "--brokers", brokers, "--slot", e.Slot, "--publication", e.Pub, "--http-addr", "")
	if code != 2 || !strings.Contains(out, "may not create publication") {
		t.Errorf("run as a role without privileges: exit %d, want 2 saying it may not create the publication:\n%s", code, out)
	}

	e.Bed.Exec(t, e.DSN, `GRANT CREATE ON DATABASE `+db+` TO `+role)
	code, out = e2etest.RunOnce(t, nil, check...)
	if code != 2 || !strings.Contains(out, "lacks ownership of outbox") || strings.Contains(out, "the CREATE privilege") {
		t.Errorf("check as a role with CREATE that does not own the table: exit %d, want 2 naming only the ownership:\n%s", code, out)
	}
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox OWNER TO `+role)
	code, out = e2etest.RunOnce(t, nil, check...)
	if code != 0 || !strings.Contains(out, "PASS  publication: missing: will be created at start") {
		t.Errorf("check as the table's owner with CREATE: exit %d, want 0:\n%s", code, out)
	}
	if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
		t.Errorf("check or a refused run created slot %s", e.Slot)
	}
}

// TestCheckTableTypo: a --table that names no table fails the table check,
// and the checks that depend on it (the publication's tables, the columns)
// are skipped: no ADD TABLE advice for a table that does not exist, no PASS.
func TestCheckTableTypo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `CREATE PUBLICATION `+e.Pub+` FOR TABLE outbox WITH (publish = 'insert')`)
	code, out := e2etest.RunOnce(t, nil, "check", "--pg-url", e.DSN, "--brokers", strings.Join(e.Bed.Brokers(), ","), "--slot", e.Slot, "--publication", e.Pub, "--table", "public.outbx")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{"FAIL  outbox tables exist: outbox table public.outbx does not exist",
		`SKIP  publication: not checked, because "outbox tables exist" failed`,
		`SKIP  outbox columns: not checked, because "outbox tables exist" failed`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, wrong := range []string{"ADD TABLE", "PASS  publication", "PASS  outbox columns"} {
		if strings.Contains(out, wrong) {
			t.Errorf("output has %q:\n%s", wrong, out)
		}
	}
}

// TestPublicationBeyondOutboxWarns: a hand-made publication FOR ALL TABLES,
// or one publishing updates and deletes, passes check with a warning that
// gives the fix; run warns the same way, relays the outbox, and counts the
// other tables' changes it decoded and dropped.
func TestPublicationBeyondOutboxWarns(t *testing.T) {
	t.Parallel()
	t.Run("for all tables", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.Bed.Exec(t, e.DSN, `CREATE PUBLICATION `+e.Pub+` FOR ALL TABLES`)
		code, out := e2etest.RunOnce(t, nil, "check", "--pg-url", e.DSN, "--brokers", strings.Join(e.Bed.Brokers(), ","), "--slot", e.Slot, "--publication", e.Pub)
		want := `WARN  publication: publication "` + e.Pub + `" is FOR ALL TABLES`
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "DROP PUBLICATION") || !strings.Contains(out, "1 warning") {
			t.Errorf("check: exit %d, want 0 with %q and the fix:\n%s", code, want, out)
		}
		c := e.Collect(t)
		relay := e.Start(t)
		relay.WaitStreaming()
		e.Bed.Exec(t, e.DSN, `INSERT INTO orders (customer, total) VALUES ('c', 10); UPDATE orders SET total = 11`)
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{}')`, harness.NewUUID(), e.AggType(0))
		c.WaitFor(1, time.Minute)
		harness.WaitFor(t, 30*time.Second, "walrelay_changes_other_tables_total to count the orders changes", func() bool {
			return relay.Metric("walrelay_changes_other_tables_total") == 2
		})
		if !strings.Contains(relay.Log(), `"msg":"publication \"`+e.Pub+`\" is FOR ALL TABLES`) {
			t.Errorf("run did not warn about the FOR ALL TABLES publication")
		}
		if code := relay.Stop(time.Minute); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
	})
	t.Run("publishes updates and deletes", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.Bed.Exec(t, e.DSN, `CREATE PUBLICATION `+e.Pub+` FOR TABLE outbox WITH (publish = 'insert, update, delete', publish_via_partition_root = true)`)
		code, out := e2etest.RunOnce(t, nil, "check", "--pg-url", e.DSN, "--brokers", strings.Join(e.Bed.Brokers(), ","), "--slot", e.Slot, "--publication", e.Pub)
		want := `WARN  publication: publication "` + e.Pub + `" publishes update, delete besides insert`
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "SET (publish = 'insert')") {
			t.Errorf("check: exit %d, want 0 with %q and the fix:\n%s", code, want, out)
		}
	})
}

// TestSetupRerunKeepsPassword: setup run again with a new password says the
// role exists and its password was not changed; --rotate-password changes
// it, without showing it.
func TestSetupRerunKeepsPassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	role := "wrs_" + e.Prefix
	t.Cleanup(func() { dropRoles(t, e, role) })
	flags := []string{"setup", "--role", role, "--pg-url", e.DSN, "--slot", e.Slot, "--publication", e.Pub}
	stored := func() string {
		var pw string
		if err := e.Bed.QueryRow(t, e.DSN, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, role).Scan(&pw); err != nil {
			t.Fatal(err)
		}
		return pw
	}
	if code, out := e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=first-" + e.Prefix}, flags...); code != 0 {
		t.Fatalf("setup: exit %d:\n%s", code, out)
	}
	first := stored()
	code, out := e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=second-" + e.Prefix}, flags...)
	if code != 0 || !strings.Contains(out, "exists: role \""+role+"\" exists: its password was NOT changed (pass --rotate-password") {
		t.Errorf("setup again: exit %d, want 0 saying the password was not changed:\n%s", code, out)
	}
	if stored() != first {
		t.Errorf("setup again without --rotate-password changed the password")
	}
	code, out = e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=second-" + e.Prefix}, append(flags, "--rotate-password")...)
	if code != 0 || !strings.Contains(out, "done:   ALTER ROLE \""+role+"\" WITH PASSWORD '***'") || strings.Contains(out, "second-"+e.Prefix) {
		t.Errorf("setup --rotate-password: exit %d, want 0 with the ALTER ROLE, password hidden:\n%s", code, out)
	}
	if stored() == first {
		t.Errorf("setup --rotate-password did not change the password")
	}
}
