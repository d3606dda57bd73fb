package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// secureServers are a PostgreSQL that takes TLS connections with SCRAM
// passwords only and a Kafka with a SASL_SSL listener that also requires a
// client certificate, started for TestSecureKafkaAndPostgres alone, and the
// files walrelay is given.
type secureServers struct {
	bed *testbed.Bed

	caFile      string // the CA that signed both servers' and the client's certificates
	otherCAFile string // a CA that signed nothing of theirs
	certFile    string // client certificate and key for Kafka
	keyFile     string
	clientCert  tls.Certificate
	caPool      *x509.CertPool

	kafkaUser, kafkaPassword string
	pgRole, pgPassword       string
	pgSuperPassword          string
	// secrets must never appear in walrelay's output, by name.
	secrets map[string]string
}

func startSecureServers(t *testing.T) *secureServers {
	t.Helper()
	dir := t.TempDir()
	ca, err := testbed.NewCA("walrelay test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testbed.NewCA("a CA nobody trusts")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue("walrelay")
	if err != nil {
		t.Fatal(err)
	}
	s := &secureServers{
		caFile:          e2etest.WriteFile(t, dir, "ca.pem", ca.CertPEM),
		otherCAFile:     e2etest.WriteFile(t, dir, "other-ca.pem", other.CertPEM),
		certFile:        e2etest.WriteFile(t, dir, "client.pem", certPEM),
		keyFile:         e2etest.WriteFile(t, dir, "client-key.pem", keyPEM),
		kafkaUser:       "walrelay",
		kafkaPassword:   "kafka-pw-" + harness.Uniq() + harness.Uniq(),
		pgRole:          "walrelay",
		pgPassword:      "pg-pw-" + harness.Uniq() + harness.Uniq(),
		pgSuperPassword: "pg-super-pw-" + harness.Uniq() + harness.Uniq(),
	}
	s.secrets = map[string]string{
		"Kafka SASL password":            s.kafkaPassword,
		"PostgreSQL password":            s.pgPassword,
		"PostgreSQL superuser password":  s.pgSuperPassword,
		"wrong Kafka SASL password":      "wrong-kafka-pw-" + harness.Uniq(),
		"wrong PostgreSQL password":      "wrong-pg-pw-" + harness.Uniq(),
		"Kafka password of another user": "reader-pw-" + harness.Uniq(),
	}
	if s.clientCert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	s.caPool = x509.NewCertPool()
	s.caPool.AppendCertsFromPEM(ca.CertPEM)

	begin := time.Now()
	s.bed = testbed.StartForTest(t, testbed.Options{
		PG:          true,
		Kafka:       true,
		PGSecurity:  &testbed.PGSecurity{CA: ca, Password: s.pgSuperPassword},
		KafkaHeapMB: 512,
		KafkaSecurity: &testbed.KafkaSecurity{CA: ca, ClientCert: true, Users: map[string]string{
			s.kafkaUser: s.kafkaPassword,
			"reader":    s.secrets["Kafka password of another user"],
		}},
	})
	t.Logf("secure PostgreSQL %s and Kafka %s (SASL_SSL at %s) started in %.1fs",
		s.bed.PGVersion(), s.bed.KafkaVersion(), strings.Join(s.bed.SecureBrokers(), ","), time.Since(begin).Seconds())
	s.bed.Exec(t, s.bed.PGURL(), fmt.Sprintf(`CREATE ROLE %s LOGIN REPLICATION PASSWORD '%s'`, s.pgRole, s.pgPassword))
	return s
}

// kafkaOpts are a client's TLS (CA and client certificate) and SASL options.
func (s *secureServers) kafkaOpts(m sasl.Mechanism, cert bool) []kgo.Opt {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.caPool}
	if cert {
		cfg.Certificates = []tls.Certificate{s.clientCert}
	}
	return []kgo.Opt{kgo.SeedBrokers(s.bed.SecureBrokers()...), kgo.DialTLSConfig(cfg), kgo.SASL(m)}
}

// newEnv makes a database with the outbox owned by the password role, and a
// --pg-url-file holding the role's DSN with sslmode=verify-full. Records
// are read back over TLS with SCRAM-SHA-512.
func (s *secureServers) newEnv(t *testing.T) *env {
	t.Helper()
	b := s.bed
	e := &env{Env: harness.NewEnvOn(t, b, relayBin), Brokers: b.SecureBrokers()}
	e.KafkaOpts = s.kafkaOpts(scram.Auth{User: s.kafkaUser, Pass: s.kafkaPassword}.AsSha512Mechanism(), true)
	u, err := url.Parse(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	// N.B. the role owns the outbox and may create in the database, so that
	// walrelay can create the publication; it is no superuser.
	b.Exec(t, e.DSN, fmt.Sprintf(`ALTER TABLE outbox OWNER TO %s; GRANT CREATE ON DATABASE %s TO %s`,
		s.pgRole, pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize(), s.pgRole))
	e.PGURLFile = e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(s.roleDSN(t, e, s.pgPassword)+"\n"))
	return e
}

// roleDSN is e's DSN as the walrelay role: host localhost, the name in the
// server's certificate, sslmode=verify-full and sslrootcert.
func (s *secureServers) roleDSN(t *testing.T, e *env, password string) string {
	t.Helper()
	dsn := e2etest.WithUser(t, e.DSN, s.pgRole, password)
	if !strings.Contains(dsn, "sslmode=verify-full") || !strings.Contains(dsn, "sslrootcert=") || !strings.Contains(dsn, "@"+testbed.PGCertHost+":") {
		t.Fatalf("the secure bed's DSN does not use verify-full with a root certificate at %s", testbed.PGCertHost)
	}
	return dsn
}

// kafkaArgs are walrelay's flags for the SASL_SSL listener.
func (s *secureServers) kafkaArgs(mechanism string) []string {
	return []string{
		"--kafka-tls-ca-file", s.caFile,
		"--kafka-tls-cert-file", s.certFile,
		"--kafka-tls-key-file", s.keyFile,
		"--kafka-sasl-mechanism", mechanism,
		"--kafka-sasl-username", s.kafkaUser,
		"--log-level", "debug",
	}
}

// assertNoSecrets fails the test if out (walrelay's whole output, or what it
// served) holds any password, as is, hex or base64.
func (s *secureServers) assertNoSecrets(t *testing.T, what, out string) {
	t.Helper()
	if len(out) == 0 {
		t.Errorf("%s is empty: nothing to search for passwords", what)
	}
	for name, secret := range s.secrets {
		b64 := base64.StdEncoding.EncodeToString([]byte(secret))
		forms := []string{secret, hex.EncodeToString([]byte(secret)), b64[:len(b64)/4*4-4]}
		for _, form := range forms {
			if !strings.Contains(out, form) {
				continue
			}
			var lines []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, form) {
					lines = append(lines, strings.ReplaceAll(l, form, "<"+strings.ToUpper(name)+">"))
				}
			}
			t.Errorf("%s shows the %s:\n%s", what, name, strings.Join(lines, "\n"))
		}
	}
}

// TestSecureKafkaAndPostgres runs walrelay against a Kafka that takes
// SASL_SSL only (TLS with a client certificate, then PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512) and a PostgreSQL that takes TLS and SCRAM passwords only,
// with the passwords from the environment or files: the records arrive, read
// back by a consumer that authenticates the same way; a wrong password, an
// untrusted CA, a wrong host name or a missing client certificate keep
// walrelay retrying and not ready, with an error in its log that says why;
// and no password ever shows in walrelay's output, even at debug level.
func TestSecureKafkaAndPostgres(t *testing.T) {
	t.Parallel()
	s := startSecureServers(t)

	t.Run("servers refuse what is not TLS with the right password", func(t *testing.T) {
		s.checkServers(t)
	})

	success := []struct {
		name      string
		mechanism string
		fromFile  bool // the SASL password from --kafka-sasl-password-file, else WALRELAY_KAFKA_SASL_PASSWORD
		args      []string
	}{
		{"SCRAM-SHA-512 password from environment", "SCRAM-SHA-512", false, nil},
		{"SCRAM-SHA-256 password from file", "SCRAM-SHA-256", true, nil},
		{"PLAIN password from environment, server name given", "PLAIN", false, []string{"--kafka-tls-server-name", "localhost"}},
	}
	for _, c := range success {
		t.Run(c.name, func(t *testing.T) {
			e := s.newEnv(t)
			args := append(s.kafkaArgs(c.mechanism), c.args...)
			var environ []string
			if c.fromFile {
				// A trailing newline, as editors and `echo` leave, is not
				// part of the password.
				args = append(args, "--kafka-sasl-password-file", e2etest.WriteFile(t, t.TempDir(), "kafka-pw", []byte(s.kafkaPassword+"\n")))
			} else {
				environ = []string{"WALRELAY_KAFKA_SASL_PASSWORD=" + s.kafkaPassword}
			}
			s.relayOutbox(t, e, environ, args)
		})
	}

	rightPG := func(t *testing.T, e *env) string { return s.roleDSN(t, e, s.pgPassword) }
	envPW := []string{"WALRELAY_KAFKA_SASL_PASSWORD=" + s.kafkaPassword}
	failures := []struct {
		name    string
		cause   string // walrelay_restarts_total label
		dsn     func(t *testing.T, e *env) string
		environ []string
		args    []string
		want    *regexp.Regexp // in walrelay's log
		// refused: a login refused on the first connection is a
		// configuration mistake: exit 2 with this hint, no retries.
		refused string
	}{
		{
			name: "wrong SASL password", cause: "kafka", dsn: rightPG,
			environ: []string{"WALRELAY_KAFKA_SASL_PASSWORD=" + s.secrets["wrong Kafka SASL password"]},
			args:    s.kafkaArgs("SCRAM-SHA-512"),
			want:    regexp.MustCompile(`SASL_AUTHENTICATION_FAILED`),
			refused: "Kafka refused the SASL login: fix --kafka-sasl-username and the password (WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file)",
		},
		{
			name: "wrong SASL password from file", cause: "kafka", dsn: rightPG,
			args: append(s.kafkaArgs("PLAIN"), "--kafka-sasl-password-file",
				e2etest.WriteFile(t, t.TempDir(), "wrong-pw", []byte(s.secrets["wrong Kafka SASL password"]))),
			want:    regexp.MustCompile(`SASL_AUTHENTICATION_FAILED`),
			refused: "Kafka refused the SASL login: fix --kafka-sasl-username and the password (WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file)",
		},
		{
			name: "CA that did not sign the broker's certificate", cause: "kafka", dsn: rightPG, environ: envPW,
			args:    append(s.kafkaArgs("SCRAM-SHA-512"), "--kafka-tls-ca-file", s.otherCAFile),
			want:    regexp.MustCompile(`x509: certificate signed by unknown authority`),
			refused: "the broker's TLS certificate is not signed by a CA walrelay trusts: set --kafka-tls-ca-file",
		},
		{
			name: "broker's certificate does not name the server name", cause: "kafka", dsn: rightPG, environ: envPW,
			args:    append(s.kafkaArgs("SCRAM-SHA-512"), "--kafka-tls-server-name", "kafka.invalid"),
			want:    regexp.MustCompile(`x509: certificate is valid for [^"]*not kafka\.invalid`),
			refused: "the broker's TLS certificate does not name the host walrelay dialed: fix --brokers to use a name in the certificate, or set --kafka-tls-server-name",
		},
		{
			name: "no client certificate", cause: "kafka", dsn: rightPG, environ: envPW,
			args: []string{"--kafka-tls-ca-file", s.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", s.kafkaUser, "--log-level", "debug"},
			want: regexp.MustCompile(`reach kafka at [^"]*remote error: tls: (bad certificate|certificate required)`),
		},
		{
			name: "PostgreSQL host name not in its certificate", cause: "postgres", environ: envPW, args: s.kafkaArgs("SCRAM-SHA-512"),
			dsn: func(t *testing.T, e *env) string {
				// N.B. the server listens on 127.0.0.1, but its certificate
				// names localhost only.
				return strings.Replace(s.roleDSN(t, e, s.pgPassword), "@"+testbed.PGCertHost+":", "@127.0.0.1:", 1)
			},
			want:    regexp.MustCompile(`x509: cannot validate certificate for 127\.0\.0\.1 because it doesn't contain any IP SANs`),
			refused: "PostgreSQL's TLS certificate does not name the host in --pg-url (sslmode=verify-full checks it): connect by a name the certificate holds",
		},
		{
			name: "wrong PostgreSQL password", cause: "postgres", environ: envPW, args: s.kafkaArgs("SCRAM-SHA-512"),
			dsn:     func(t *testing.T, e *env) string { return s.roleDSN(t, e, s.secrets["wrong PostgreSQL password"]) },
			want:    regexp.MustCompile(`password authentication failed for user.*SQLSTATE 28P01`),
			refused: "PostgreSQL refused the password: fix the password in --pg-url (WALRELAY_PG_URL, or the file of --pg-url-file)",
		},
	}
	for _, c := range failures {
		t.Run(c.name, func(t *testing.T) {
			e := s.newEnv(t)
			e.PGURLFile = e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(c.dsn(t, e)))
			if c.refused != "" {
				s.relayRefusedAtStart(t, e, c.environ, c.args, c.want, c.refused)
				return
			}
			s.relayRefused(t, e, c.environ, c.args, c.cause, c.want)
		})
	}
}

// relayOutbox streams a workload through walrelay and checks every
// committed row arrives once, in order, byte-exact.
func (s *secureServers) relayOutbox(t *testing.T, e *env, environ, args []string) {
	t.Helper()
	w := &harness.Workload{Writers: 2, Events: 300, Aggregates: 10, MaxTxRows: 5, Rollback: 0.1}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.StartEnv(t, environ, args...)
	relay.WaitStreaming()

	// The walsender streaming the slot is the password role's, over TLS.
	// N.B. WaitStreaming may return while the backend that creates the
	// slot holds it; wait for the walsender.
	var user, version string
	var ssl bool
	harness.WaitFor(t, time.Minute, "a walsender to hold slot "+e.Slot, func() bool {
		err := e.Bed.QueryRow(t, e.DSN, `SELECT a.usename, s.ssl, coalesce(s.version, '')
			FROM pg_replication_slots r JOIN pg_stat_activity a ON a.pid = r.active_pid JOIN pg_stat_ssl s ON s.pid = a.pid
			WHERE r.slot_name = $1 AND a.backend_type = 'walsender'`, e.Slot).Scan(&user, &ssl, &version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("read the walsender of slot %s: %v", e.Slot, err)
		}
		return err == nil
	})
	if user != s.pgRole || !ssl {
		t.Errorf("the slot's walsender runs as %q with ssl=%v, want %q over TLS", user, ssl, s.pgRole)
	}

	if err := w.Run(context.Background(), e.Env); err != nil {
		t.Fatalf("writers: %v", err)
	}
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), 2*time.Minute)
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, w.RolledBack(), 3, false)
	code, body := relay.Get("/readyz")
	if code != 200 {
		t.Errorf("/readyz = %d %q, want 200", code, body)
	}
	_, metrics := relay.Get("/metrics")
	// N.B. a consumer can read a record before the producer has handled
	// Kafka's acknowledgement, which counts it: wait for every ack.
	harness.WaitFor(t, 30*time.Second, "walrelay_inflight_events to drop to 0", func() bool { return relay.Metric("walrelay_inflight_events") == 0 })
	if got := relay.Metric("walrelay_events_published_total"); got != float64(len(rows)) {
		t.Errorf("walrelay_events_published_total = %v, want %d", got, len(rows))
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	// check and status take the same flags and files.
	code, checkOut := e2etest.RunOnce(t, environ, append(e.CommandArgs("check"), args...)...)
	if code != 0 || !strings.Contains(checkOut, "checks passed") || !strings.Contains(checkOut, "PASS  reach Kafka") {
		t.Errorf("walrelay check: exit %d, want 0 with every check passed:\n%s", code, checkOut)
	}
	s.assertNoSecrets(t, "walrelay check's output", checkOut)
	code, statusOut := e2etest.RunOnce(t, environ, append(e.CommandArgs("status"), args...)...)
	if code != 0 || !strings.Contains(statusOut, "active                 no") {
		t.Errorf("walrelay status: exit %d, want 0 with an inactive slot:\n%s", code, statusOut)
	}
	s.assertNoSecrets(t, "walrelay status's output", statusOut)
	out := relay.Log()
	if !strings.Contains(out, `"level":"debug"`) {
		t.Errorf("walrelay logged nothing at debug level: the password check covers less than it claims")
	}
	s.assertNoSecrets(t, "walrelay's output", out)
	s.assertNoSecrets(t, "/metrics", metrics)
	t.Logf("%d rows relayed over TLS (%s, PostgreSQL as %s); walrelay's output: %d lines", len(rows), version, user, strings.Count(out, "\n"))
}

// relayRefusedAtStart starts walrelay with credentials a server refuses at
// login: run and check exit 2 with the server's error and the hint naming
// the setting to fix, without a password in the output.
func (s *secureServers) relayRefusedAtStart(t *testing.T, e *env, environ, args []string, want *regexp.Regexp, hint string) {
	t.Helper()
	pgURL := []string{"--pg-url-file", e.PGURLFile}
	for _, cmd := range []string{"run", "check"} {
		all := append(e.RunArgs(pgURL, e.KafkaBrokers()), args...)
		if cmd == "check" {
			all = append(e.CommandArgs("check"), args...)
		}
		code, out := e2etest.RunFor(t, time.Minute, environ, all...)
		if code != 2 || !want.MatchString(out) || !strings.Contains(out, hint) {
			t.Errorf("walrelay %s: exit %d, want 2 with %q and %q:\n%s", cmd, code, want, hint, out)
		}
		if strings.Contains(out, "restarting from the last confirmed position") {
			t.Errorf("walrelay %s says it restarts from a confirmed position it never had:\n%s", cmd, out)
		}
		s.assertNoSecrets(t, "walrelay "+cmd+"'s output", out)
	}
}

// relayRefused starts walrelay with a setting the servers refuse: it must
// log why, retry (neither exit nor stream), stay alive but not ready, and
// stop cleanly.
func (s *secureServers) relayRefused(t *testing.T, e *env, environ, args []string, cause string, want *regexp.Regexp) {
	t.Helper()
	relay := e.StartEnv(t, environ, args...)
	// The error is in walrelay's own warning, at the default level, not
	// only in the Kafka client's debug lines.
	var logged string
	harness.WaitFor(t, time.Minute, fmt.Sprintf("walrelay to log a restart with an error matching %q", want), func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited (%v) instead of retrying", relay.Err())
		}
		for _, line := range strings.Split(relay.Log(), "\n") {
			// N.B. it never streamed: its warning says so, rather than
			// that it restarts from a confirmed position.
			if (strings.Contains(line, `"logger":"walrelay","msg":"start failed, not streamed yet: retrying"`) ||
				strings.Contains(line, `"logger":"walrelay","msg":"cannot connect to PostgreSQL, never connected yet: retrying`)) && want.MatchString(line) {
				logged = line
				return true
			}
		}
		return false
	})
	metric := fmt.Sprintf(`walrelay_restarts_total{cause=%q}`, cause)
	harness.WaitFor(t, time.Minute, metric+" to reach 2", func() bool {
		v, _ := relay.MetricOK(metric)
		return v >= 2
	})
	before := e.Bed.CurrentWALLSN(t, e.DSN)
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))
	time.Sleep(time.Second)
	if relay.Exited() {
		t.Fatalf("walrelay exited (%v) instead of retrying", relay.Err())
	}
	readyCode, readyBody := relay.Get("/readyz")
	if readyCode != 503 {
		t.Errorf("/readyz = %d %q, want 503", readyCode, readyBody)
	}
	if code, body := relay.Get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d %q, want 200 (alive, retrying)", code, body)
	}
	if v, _ := relay.MetricOK(`walrelay_state{state="streaming"}`); v != 0 {
		t.Errorf(`walrelay_state{state="streaming"} = %v, want 0`, v)
	}
	// N.B. a refused Kafka leaves the slot created but never streamed; a
	// refused PostgreSQL leaves no slot at all.
	if slot := e.Bed.Slot(t, e.DSN, e.Slot); slot.Active || slot.ConfirmedFlushLSN > before {
		t.Errorf("slot %s is active (pid %d) or confirmed %s past the insert at %s: walrelay streams", e.Slot, slot.ActivePID, slot.ConfirmedFlushLSN, before)
	}
	_, metrics := relay.Get("/metrics")
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	out := relay.Log()
	s.assertNoSecrets(t, "walrelay's output", out)
	s.assertNoSecrets(t, "/readyz", readyBody)
	s.assertNoSecrets(t, "/metrics", metrics)
	// walrelay check fails the same way, and says so without the password.
	code, checkOut := e2etest.RunOnce(t, environ, append(e.CommandArgs("check"), args...)...)
	if code != 2 || !want.MatchString(checkOut) || !strings.Contains(checkOut, "FAIL  ") {
		t.Errorf("walrelay check: exit %d, want 2 with a FAIL line matching %q:\n%s", code, want, checkOut)
	}
	s.assertNoSecrets(t, "walrelay check's output", checkOut)
	t.Logf("walrelay retried (%s) and logged: %.600s", metric, logged)
}

// checkServers shows the servers are secured the way the test claims, with
// clients other than walrelay.
func (s *secureServers) checkServers(t *testing.T) {
	ctx := context.Background()
	dsn := s.bed.PGURL()
	connErr := func(dsn string) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgconn.Connect(cctx, dsn)
		if err == nil {
			conn.Close(cctx)
		}
		return err
	}
	sqlstate := func(err error) string {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return pgErr.Code
		}
		return ""
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "disable")
	q.Del("sslrootcert")
	noTLS := *u
	noTLS.RawQuery = q.Encode()
	if err := connErr(noTLS.String()); sqlstate(err) != "28000" {
		t.Errorf("PostgreSQL without TLS: %v, want SQLSTATE 28000 (no pg_hba.conf entry)", err)
	}
	noPW := *u
	noPW.User = url.User("postgres")
	if err := connErr(noPW.String()); err == nil {
		t.Errorf("PostgreSQL let the superuser in without a password")
	}
	if err := connErr(e2etest.WithUser(t, dsn, s.pgRole, s.secrets["wrong PostgreSQL password"])); sqlstate(err) != "28P01" {
		t.Errorf("PostgreSQL with a wrong password: %v, want SQLSTATE 28P01", err)
	}
	var hba []string
	var stored string
	if err := s.bed.QueryRow(t, dsn, `SELECT array_agg(type || ' ' || array_to_string(database, ',') || ' ' || array_to_string(user_name, ',') || ' ' || coalesce(address, '') || ' ' || coalesce(netmask, '') || ' ' || auth_method ORDER BY line_number)
		FROM pg_hba_file_rules`).Scan(&hba); err != nil {
		t.Fatal(err)
	}
	if want := "hostssl all all 127.0.0.1 255.255.255.255 scram-sha-256"; len(hba) != 1 || hba[0] != want {
		t.Errorf("pg_hba.conf rules %q, want only %q", hba, want)
	}
	if err := s.bed.QueryRow(t, dsn, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, s.pgRole).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stored, "SCRAM-SHA-256$") {
		t.Errorf("role %s's password is stored as %.14s..., want a SCRAM-SHA-256 verifier", s.pgRole, stored)
	}

	ping := func(opts []kgo.Opt) error {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return cl.Ping(pctx)
	}
	wrong := s.secrets["wrong Kafka SASL password"]
	for _, m := range []struct {
		name        string
		right, nope sasl.Mechanism
	}{
		{"PLAIN", plain.Auth{User: s.kafkaUser, Pass: s.kafkaPassword}.AsMechanism(), plain.Auth{User: s.kafkaUser, Pass: wrong}.AsMechanism()},
		{"SCRAM-SHA-256", scram.Auth{User: s.kafkaUser, Pass: s.kafkaPassword}.AsSha256Mechanism(), scram.Auth{User: s.kafkaUser, Pass: wrong}.AsSha256Mechanism()},
		{"SCRAM-SHA-512", scram.Auth{User: s.kafkaUser, Pass: s.kafkaPassword}.AsSha512Mechanism(), scram.Auth{User: s.kafkaUser, Pass: wrong}.AsSha512Mechanism()},
	} {
		if err := ping(s.kafkaOpts(m.right, true)); err != nil {
			t.Errorf("Kafka SASL_SSL with %s: %v", m.name, err)
		}
		if err := ping(s.kafkaOpts(m.nope, true)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("Kafka SASL_SSL with %s and a wrong password: %v, want SASL_AUTHENTICATION_FAILED", m.name, err)
		}
	}
	if err := ping(s.kafkaOpts(scram.Auth{User: s.kafkaUser, Pass: s.kafkaPassword}.AsSha512Mechanism(), false)); err == nil {
		t.Errorf("Kafka SASL_SSL let a client without a certificate in")
	}
	if err := ping([]kgo.Opt{kgo.SeedBrokers(s.bed.SecureBrokers()...), kgo.DialTimeout(5 * time.Second)}); err == nil {
		t.Errorf("Kafka's SASL_SSL listener answered a plaintext client without SASL")
	}
}

// TestSecureConfigurationMistakes: mistakes in the security settings exit 2
// before connecting anywhere, with a message that names the flag, and
// without the password, even when a file given for something else holds it.
func TestSecureConfigurationMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const kafkaPW, pgPW = "kafka-pw-never-shown", "pg-pw-never-shown"
	pwFile := e2etest.WriteFile(t, dir, "kafka-pw", []byte(kafkaPW+"\n"))
	badDSN := e2etest.WriteFile(t, dir, "bad-dsn", []byte("postgres://walrelay:"+pgPW+"@[::1/db?sslmode=verify-full\n"))
	goodDSN := e2etest.WriteFile(t, dir, "dsn", []byte("postgres://walrelay:"+pgPW+"@localhost:1/db?sslmode=verify-full\n"))
	pwEnv := []string{"WALRELAY_KAFKA_SASL_PASSWORD=" + kafkaPW}
	base := func(extra ...string) []string {
		return append([]string{"run", "--pg-url-file", goodDSN, "--brokers", "127.0.0.1:1", "--http-addr", ""}, extra...)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unparsable DSN in --pg-url-file", nil, []string{"run", "--pg-url-file", badDSN, "--http-addr", ""}, "PostgreSQL connection string"},
		{"--pg-url and --pg-url-file", nil, base("--pg-url", "postgres://walrelay:"+pgPW+"@localhost/db"), "--pg-url and --pg-url-file are both set"},
		{"missing --pg-url-file", nil, []string{"run", "--pg-url-file", filepath.Join(dir, "nope"), "--http-addr", ""}, "--pg-url-file: open"},
		{"unknown SASL mechanism", pwEnv, base("--kafka-sasl-mechanism", "SCRAM-SHA-1", "--kafka-sasl-username", "u"), `want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"SASL without a user", pwEnv, base("--kafka-sasl-mechanism", "SCRAM-SHA-512"), "needs --kafka-sasl-username"},
		{"SASL without a password", nil, base("--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u"), "a password in WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file"},
		{"password without a mechanism", pwEnv, base("--kafka-sasl-username", "u"), "no --kafka-sasl-mechanism"},
		{"missing password file", nil, base("--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u", "--kafka-sasl-password-file", filepath.Join(dir, "nope")), "--kafka-sasl-password-file: open"},
		{"CA file that holds the password", nil, base("--kafka-tls-ca-file", pwFile), "no PEM certificate in it"},
		{"client certificate that holds the password", nil, base("--kafka-tls-cert-file", pwFile, "--kafka-tls-key-file", pwFile), "client certificate"},
		{"client certificate without its key", nil, base("--kafka-tls-cert-file", pwFile), "go together"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := e2etest.RunOnce(t, c.env, append(c.args, "--log-level", "debug")...)
			if code != 2 {
				t.Errorf("exit code %d, want 2; output:\n%s", code, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out)
			}
			for _, pw := range []string{kafkaPW, pgPW} {
				if strings.Contains(out, pw) {
					t.Errorf("output shows a password:\n%s", out)
				}
			}
		})
	}
}
