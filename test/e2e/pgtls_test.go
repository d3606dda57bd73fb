package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// tlsServer is a PostgreSQL of a test's own that takes TLS (and, from a
// non-loopback address of this machine, plaintext) connections with SCRAM
// passwords, and the files and addresses a test gives walrelay.
type tlsServer struct {
	bed         *testbed.Bed
	other       string // the non-loopback address it listens on and its certificate names
	port        int
	caFile      string
	otherCAFile string
	superPW     string
	brokers     []string // the shared bed's plaintext Kafka
}

func startTLSServer(t *testing.T) *tlsServer {
	t.Helper()
	other, err := testbed.NonLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := testbed.NewCA("walrelay pg CA")
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := testbed.NewCA("a CA that signed nothing")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &tlsServer{
		other:       other,
		caFile:      e2etest.WriteFile(t, dir, "ca.pem", ca.CertPEM),
		otherCAFile: e2etest.WriteFile(t, dir, "other-ca.pem", wrong.CertPEM),
		superPW:     "pg-super-" + harness.Uniq(),
		brokers:     testbed.Get(t).Brokers(),
	}
	s.bed = testbed.StartForTest(t, testbed.Options{PG: true, PGSecurity: &testbed.PGSecurity{CA: ca, Password: s.superPW, OtherHost: other}})
	u, err := url.Parse(s.bed.PGURL())
	if err != nil {
		t.Fatal(err)
	}
	if s.port, err = strconv.Atoi(u.Port()); err != nil {
		t.Fatal(err)
	}
	return s
}

// dsn is a connection string to db as user, at host, with the query q
// (sslmode and sslrootcert).
func (s *tlsServer) dsn(user, password, host, db, q string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: fmt.Sprintf("%s:%d", host, s.port), Path: "/" + db, RawQuery: q}
	return u.String()
}

// TestPostgresTLSPolicy: walrelay reports the effective sslmode and whether
// its connections run over TLS; verify-full with the right CA works, a wrong
// CA or host name is refused by the TLS handshake; below verify-full on a
// host that is not loopback walrelay refuses to start (exit 2, the fix in
// the message) unless --pg-require-verified-tls=false, and then warns in its
// JSON log; loopback hosts are not refused (quick starts). The streaming
// walsender's pg_stat_ssl row shows TLS from the server's side.
func TestPostgresTLSPolicy(t *testing.T) {
	t.Parallel()
	s := startTLSServer(t)
	e := &env{Env: harness.NewEnvOn(t, s.bed, relayBin), Brokers: s.brokers}
	db := strings.TrimPrefix(mustURL(t, e.DSN).Path, "/")
	verifyFull := "sslmode=verify-full&sslrootcert=" + url.QueryEscape(s.caFile)
	pw := []string{"postgres", s.superPW}
	check := func(t *testing.T, dsn string, extra ...string) (int, string) {
		t.Helper()
		e.PGURLFile = e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(dsn))
		return e2etest.RunOnce(t, nil, append(e.CommandArgs("check"), extra...)...)
	}
	tlsLine := regexp.MustCompile(`(?m)^PASS  PostgreSQL TLS: ` + regexp.QuoteMeta(fmt.Sprintf("%s:%d", s.other, s.port)) +
		` sslmode=verify-full; SQL connection: TLS 1\.[23], replication connection: TLS 1\.[23]$`)

	t.Run("verify-full with the right CA, host not loopback", func(t *testing.T) {
		code, out := check(t, s.dsn(pw[0], pw[1], s.other, db, verifyFull))
		if code != 0 || !tlsLine.MatchString(out) {
			t.Errorf("check: exit %d, want 0 with a line matching %q:\n%s", code, tlsLine, out)
		}
	})
	refusedByTLS := []struct{ name, dsn, want string }{
		{"wrong CA", s.dsn(pw[0], pw[1], s.other, db, "sslmode=verify-full&sslrootcert="+url.QueryEscape(s.otherCAFile)), "x509: certificate signed by unknown authority"},
		{"host name not in the certificate", s.dsn(pw[0], pw[1], "127.0.0.1", db, verifyFull), "x509: certificate is valid for " + s.other + ", not 127.0.0.1"},
	}
	for _, c := range refusedByTLS {
		t.Run(c.name, func(t *testing.T) {
			code, out := check(t, c.dsn)
			if code != 2 || !strings.Contains(out, "FAIL  connect to PostgreSQL") || !strings.Contains(out, c.want) {
				t.Errorf("check: exit %d, want 2 with FAIL connect to PostgreSQL: ... %s:\n%s", code, c.want, out)
			}
		})
	}

	// Below verify-full on the non-loopback address: refused by default.
	host := fmt.Sprintf("%s:%d", s.other, s.port)
	refused := []struct{ name, query, mode string }{
		{"sslmode=disable", "sslmode=disable", "disable"},
		{"no sslmode (pgx's prefer)", "", "prefer"},
		{"sslmode=require", "sslmode=require", "require"},
		{"sslmode=verify-ca", "sslmode=verify-ca&sslrootcert=" + url.QueryEscape(s.caFile), "verify-ca"},
	}
	for _, c := range refused {
		t.Run("refused by default: "+c.name, func(t *testing.T) {
			want := fmt.Sprintf("PostgreSQL host %s (--pg-url) is reached with sslmode=%s", host, c.mode)
			fix := "add sslmode=verify-full and sslrootcert="
			dsn := s.dsn(pw[0], pw[1], s.other, db, c.query)
			file := e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(dsn))
			for _, args := range [][]string{
				e.RunArgs([]string{"--pg-url-file", file}, e.Brokers),
				{"check", "--pg-url-file", file, "--brokers", strings.Join(e.Brokers, ",")},
				{"status", "--pg-url-file", file, "--slot", e.Slot},
				{"setup", "--pg-url-file", file, "--role", ""},
			} {
				code, out := e2etest.RunFor(t, 30*time.Second, nil, args...)
				if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, fix) || !strings.Contains(out, "--pg-require-verified-tls=false") {
					t.Errorf("walrelay %s: exit %d, want 2 with %q and the fix:\n%s", args[0], code, want, out)
				}
				if strings.Contains(out, s.superPW) {
					t.Errorf("walrelay %s shows the password:\n%s", args[0], out)
				}
			}
		})
	}
	t.Run("standby URL below verify-full refused by default", func(t *testing.T) {
		standby := s.dsn(pw[0], pw[1], s.other, db, "sslmode=disable")
		for _, cmd := range []string{"check", "status"} {
			args := []string{cmd, "--pg-url", s.dsn(pw[0], pw[1], s.other, db, verifyFull), "--pg-standby-url", standby, "--slot", e.Slot, "--brokers", strings.Join(e.Brokers, ",")}
			code, out := e2etest.RunOnce(t, nil, args...)
			want := fmt.Sprintf("PostgreSQL host %s (--pg-standby-url) is reached with sslmode=disable", host)
			if code != 2 || !strings.Contains(out, want) {
				t.Errorf("walrelay %s: exit %d, want 2 with %q:\n%s", cmd, code, want, out)
			}
		}
	})

	t.Run("standby URL below verify-full warned about with --pg-require-verified-tls=false", func(t *testing.T) {
		standby := s.dsn(pw[0], pw[1], s.other, db, "sslmode=disable")
		code, out := e2etest.RunOnce(t, nil, "status", "--pg-url", s.dsn(pw[0], pw[1], s.other, db, verifyFull), "--pg-standby-url", standby,
			"--slot", e.Slot, "--pg-require-verified-tls=false")
		want := regexp.MustCompile(`(?m)^\{"level":"warn",.*"msg":"postgresql connection not verified: ` +
			regexp.QuoteMeta(fmt.Sprintf("PostgreSQL host %s (--pg-standby-url) is reached with sslmode=disable", host)))
		// N.B. exit 2: the slot does not exist yet; the warning comes first.
		if code != 2 || !want.MatchString(out) || !strings.Contains(out, "does not exist") {
			t.Errorf("walrelay status: exit %d, want 2 (no slot yet) with a JSON warn line matching %q:\n%s", code, want, out)
		}
	})
	t.Run("sslmode=disable accepted with --pg-require-verified-tls=false, and warned about", func(t *testing.T) {
		dsn := s.dsn(pw[0], pw[1], s.other, db, "sslmode=disable")
		warn := fmt.Sprintf("PostgreSQL host %s (--pg-url) is reached with sslmode=disable", host)
		code, out := check(t, dsn, "--pg-require-verified-tls=false")
		if code != 0 || !strings.Contains(out, "WARN  PostgreSQL TLS: "+warn) || !strings.Contains(out, "SQL connection: no TLS, replication connection: no TLS") {
			t.Errorf("check: exit %d, want 0 with WARN  PostgreSQL TLS: %s and no TLS on either connection:\n%s", code, warn, out)
		}
		e.PGURLFile = e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(dsn))
		relay := e.StartEnv(t, nil, "--pg-require-verified-tls=false")
		relay.WaitStreaming()
		log := waitLogged(t, relay, `"msg":"streaming"`)
		if !regexp.MustCompile(`\{"level":"warn",[^\n]*"msg":"postgresql connection not verified: ` + regexp.QuoteMeta(warn)).MatchString(log) {
			t.Errorf("walrelay's JSON log has no warn line %q:\n%.3000s", warn, log)
		}
		if !regexp.MustCompile(`"msg":"streaming"[^\n]*"tls":false`).MatchString(log) {
			t.Errorf("walrelay's streaming line does not say tls false:\n%.3000s", log)
		}
		if ssl := walsenderSSL(t, e); ssl {
			t.Errorf("pg_stat_ssl shows the walsender over TLS, with sslmode=disable")
		}
		if code := relay.Stop(time.Minute); code != 0 {
			t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
		}
	})

	t.Run("run over verify-full: the walsender uses TLS", func(t *testing.T) {
		e.PGURLFile = e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(s.dsn(pw[0], pw[1], s.other, db, verifyFull)))
		relay := e.StartEnv(t, nil)
		relay.WaitStreaming()
		log := waitLogged(t, relay, `"msg":"streaming"`)
		if !regexp.MustCompile(`"msg":"postgresql tls","hosts":"`+regexp.QuoteMeta(host)+` sslmode=verify-full","sql_connection":"TLS 1\.[23]","replication_connection":"TLS 1\.[23]"`).MatchString(log) ||
			!regexp.MustCompile(`"msg":"streaming"[^\n]*"tls":true,"tls_version":"TLS 1\.[23]"`).MatchString(log) {
			t.Errorf("walrelay's start-up log lacks the TLS mode and state:\n%.3000s", log)
		}
		if strings.Contains(log, `"level":"warn"`) && strings.Contains(log, "not verified") {
			t.Errorf("walrelay warns about a verified connection:\n%.3000s", log)
		}
		if !walsenderSSL(t, e) {
			t.Errorf("pg_stat_ssl shows the walsender without TLS, with sslmode=verify-full")
		}
		if code := relay.Stop(time.Minute); code != 0 {
			t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
		}
	})

	t.Run("loopback below verify-full: neither refused nor warned", func(t *testing.T) {
		code, out := check(t, s.dsn(pw[0], pw[1], "localhost", db, "sslmode=require"))
		want := fmt.Sprintf("PASS  PostgreSQL TLS: localhost:%d sslmode=require (loopback); SQL connection: TLS 1.", s.port)
		if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "WARN  PostgreSQL TLS") {
			t.Errorf("check: exit %d, want 0 with %q and no TLS warning:\n%s", code, want, out)
		}
	})
}

// waitLogged waits for relay to log a line holding s and returns its log.
func waitLogged(t *testing.T, relay *relayProc, s string) string {
	t.Helper()
	harness.WaitFor(t, time.Minute, "walrelay to log "+s, func() bool { return strings.Contains(relay.Log(), s) })
	return relay.Log()
}

// walsenderSSL is pg_stat_ssl.ssl of the walsender streaming e's slot.
func walsenderSSL(t *testing.T, e *env) bool {
	t.Helper()
	var ssl bool
	harness.WaitFor(t, time.Minute, "a walsender to hold slot "+e.Slot, func() bool {
		err := e.Bed.QueryRow(t, e.DSN, `SELECT s.ssl FROM pg_replication_slots r JOIN pg_stat_activity a ON a.pid = r.active_pid
			JOIN pg_stat_ssl s ON s.pid = a.pid WHERE r.slot_name = $1 AND a.backend_type = 'walsender'`, e.Slot).Scan(&ssl)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("read the walsender of slot %s: %v", e.Slot, err)
		}
		return err == nil
	})
	return ssl
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSetupSendsNoPassword: walrelay setup sends the role's password as a
// SCRAM-SHA-256 verifier, so neither log_statement=ddl nor the statement
// logged with an error shows it, and the role logs in with the password
// (over TLS, SCRAM only); it grants no SELECT on the outbox, and walrelay
// check passes as the role without it.
func TestSetupSendsNoPassword(t *testing.T) {
	t.Parallel()
	s := startTLSServer(t)
	e := &env{Env: harness.NewEnvOn(t, s.bed, relayBin), Brokers: s.brokers}
	super := e.DSN // verify-full at localhost as postgres
	db := strings.TrimPrefix(mustURL(t, super).Path, "/")
	verifyFull := "sslmode=verify-full&sslrootcert=" + url.QueryEscape(s.caFile)
	s.bed.Exec(t, super, `ALTER SYSTEM SET log_statement = 'ddl'`)
	s.bed.Exec(t, super, `SELECT pg_reload_conf()`)
	serverLog := func() string {
		b, err := os.ReadFile(s.bed.PGLogPath())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	login := func(role, password string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgconn.Connect(ctx, s.dsn(role, password, "localhost", db, verifyFull))
		if err == nil {
			conn.Close(ctx)
		}
		return err
	}
	role := "walrelay_" + harness.Uniq()
	pw1, pw2 := "setup-pw-"+harness.Uniq()+"-é", "rotated-pw-"+harness.Uniq()
	setup := func(password string, args ...string) (int, string) {
		return e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=" + password},
			append([]string{"setup", "--pg-url", super, "--brokers", strings.Join(e.Brokers, ","), "--slot", e.Slot, "--publication", e.Pub, "--role", role}, args...)...)
	}

	code, out := setup(pw1)
	if code != 0 {
		t.Fatalf("setup: exit %d:\n%s", code, out)
	}
	code, out2 := setup(pw2, "--rotate-password")
	if code != 0 {
		t.Fatalf("setup --rotate-password: exit %d:\n%s", code, out2)
	}
	// A failing CREATE ROLE: its statement goes to the log with the error
	// (log_min_error_statement = error).
	s.bed.Exec(t, super, fmt.Sprintf(`CREATE ROLE app_%s LOGIN PASSWORD '%s'`, role, s.superPW))
	pw3 := "failed-pw-" + harness.Uniq()
	code, out3 := e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=" + pw3},
		"setup", "--pg-url", s.dsn("app_"+role, s.superPW, "localhost", db, verifyFull), "--brokers", strings.Join(e.Brokers, ","),
		"--slot", e.Slot, "--publication", e.Pub, "--role", "other_"+role)
	if code == 0 || !strings.Contains(out3, "(SQLSTATE 42501)") {
		t.Errorf("setup as a role without CREATEROLE: exit %d, want a failure (SQLSTATE 42501, insufficient privilege):\n%s", code, out3)
	}

	logged := serverLog()
	for _, c := range []struct{ name, pw, out string }{{"first", pw1, out}, {"rotated", pw2, out2}, {"refused", pw3, out3}} {
		if strings.Contains(logged, c.pw) {
			t.Errorf("the server log shows the %s password", c.name)
		}
		if strings.Contains(c.out, c.pw) {
			t.Errorf("setup's output shows the %s password:\n%s", c.name, c.out)
		}
	}
	// The statements did reach the log, with verifiers instead.
	verifier := regexp.MustCompile(`(?:CREATE|ALTER) ROLE "(?:other_)?` + role + `" WITH (?:LOGIN REPLICATION )?PASSWORD 'SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+'`)
	if n := len(verifier.FindAllString(logged, -1)); n < 3 {
		t.Errorf("the server log has %d CREATE/ALTER ROLE statements with a SCRAM-SHA-256 verifier, want 3 (created, rotated, refused):\n%s", n, grepLines(logged, "ROLE"))
	}
	if err := login(role, pw2); err != nil {
		t.Errorf("the role does not log in with the rotated password: %v", err)
	}
	if err := login(role, pw1); err == nil {
		t.Errorf("the role still logs in with the password before the rotation")
	}
	var stored string
	var canSelect bool
	if err := s.bed.QueryRow(t, super, `SELECT rolpassword, has_table_privilege($1::name, 'public.outbox', 'SELECT') FROM pg_authid WHERE rolname = $1::name`, role).Scan(&stored, &canSelect); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stored, "SCRAM-SHA-256$4096:") {
		t.Errorf("the role's password is stored as %.20s..., want a SCRAM-SHA-256 verifier", stored)
	}
	if canSelect {
		t.Errorf("setup granted the role SELECT on the outbox; streaming does not need it")
	}
	// walrelay check passes as the role, without SELECT on the outbox.
	e.PGURLFile = e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(s.dsn(role, pw2, "localhost", db, verifyFull)))
	code, checkOut := e2etest.RunOnce(t, nil, append(e.CommandArgs("check"), "--create=false")...)
	if code != 0 {
		t.Errorf("check as the role: exit %d, want 0:\n%s", code, checkOut)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSetupPrintQuotesCraftedNames: setup refuses (exit 2, with the rule)
// a slot, publication or role name that is not a plain name, on every path;
// a table name PostgreSQL allows but that holds quotes and SQL is quoted in
// setup --print, and the printed SQL, run as it is, creates the publication
// of that table and nothing else.
func TestSetupPrintQuotesCraftedNames(t *testing.T) {
	t.Parallel()
	e := harness.NewEnv(t, relayBin)
	refused := []struct {
		flag, value, want string
	}{
		{"--slot", "x', 'pgoutput'); DROP TABLE outbox; --", `slot "x', 'pgoutput'); DROP TABLE outbox; --": use 1-63 lower-case letters`},
		{"--publication", `p" FOR ALL TABLES; --`, `publication "p\" FOR ALL TABLES; --": use 1-63 lower-case letters`},
		{"--role", `w" SUPERUSER; --`, `--role "w\" SUPERUSER; --": use 1-63 letters`},
		{"--role", "pg_monitor", "reserved for PostgreSQL's own roles"},
		{"--table", "public.out\nbox", "without control characters"},
	}
	for _, c := range refused {
		for _, print := range []bool{true, false} {
			args := []string{"setup", c.flag, c.value}
			if print {
				args = append(args, "--print")
			} else {
				args = append(args, "--pg-url", e.DSN)
			}
			code, out := e2etest.RunOnce(t, []string{"WALRELAY_SETUP_ROLE_PASSWORD=pw"}, args...)
			if code != 2 || !strings.Contains(out, c.want) {
				t.Errorf("setup %s %q (print %v): exit %d, want 2 with %q:\n%s", c.flag, c.value, print, code, c.want, out)
			}
			if strings.Contains(out, "DROP TABLE") && !strings.Contains(out, "invalid configuration") || strings.Contains(out, "SUPERUSER;\n") {
				t.Errorf("setup printed the injected SQL:\n%s", out)
			}
		}
	}

	// A legal but hostile table name and a role name that needs quoting.
	table := `outbox"; DROP TABLE outbox; --`
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`CREATE TABLE %s (LIKE outbox INCLUDING ALL)`, pgx.Identifier{"public", table}.Sanitize()))
	role := "Relay-" + harness.Uniq()
	code, out := e2etest.RunOnce(t, nil, "setup", "--print", "--slot", e.Slot, "--publication", e.Pub, "--role", role, "--table", "public."+table)
	if code != 0 {
		t.Fatalf("setup --print: exit %d:\n%s", code, out)
	}
	wantHBA := fmt.Sprintf(`hostssl    <database>    "%s"    <CIDR>    scram-sha-256`, role)
	if !strings.Contains(out, wantHBA) {
		t.Errorf("setup --print's pg_hba.conf line is not %q:\n%s", wantHBA, out)
	}
	sql, _, _ := strings.Cut(out, "\n# pg_hba.conf")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// N.B. one statement at a time, as psql runs a script: a slot is
	// created outside a transaction that wrote.
	for _, stmt := range strings.Split(sql, "\n") {
		if stmt = strings.TrimSpace(stmt); stmt == "" || strings.HasPrefix(stmt, "--") {
			continue
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("run the SQL setup --print printed: %s: %v", stmt, err)
		}
	}
	var tables []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(tablename::text), '{}') FROM pg_publication_tables WHERE pubname = $1`, e.Pub).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 || tables[0] != table {
		t.Errorf("publication %s lists %q, want only %q", e.Pub, tables, table)
	}
	var outbox, roleOK bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('public.outbox') IS NOT NULL, EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1 AND rolreplication AND NOT rolsuper)`, role).Scan(&outbox, &roleOK); err != nil {
		t.Fatal(err)
	}
	if !outbox {
		t.Errorf("the printed SQL dropped table outbox")
	}
	if !roleOK {
		t.Errorf("the printed SQL did not create role %q with REPLICATION and without SUPERUSER", role)
	}
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`SELECT pg_drop_replication_slot(%s)`, "'"+e.Slot+"'"))
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, pgx.Identifier{role}.Sanitize()))
}
