package kafkaconn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestSecurityResolve(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("secret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		sec      Security
		opts     int
		warnings []string
		errs     []string // each a part of the error; nil: no error
	}{
		{name: "zero: plaintext, no SASL", sec: Security{}},
		{name: "TLS", sec: Security{TLS: true}, opts: 1},
		{name: "a CA file turns TLS on", sec: Security{CAFile: filepath.Join(dir, "missing.pem")},
			errs: []string{"--kafka-tls-ca-file: open " + filepath.Join(dir, "missing.pem")}},
		{name: "CA file without PEM", sec: Security{TLS: true, CAFile: notPEM},
			errs: []string{"--kafka-tls-ca-file " + notPEM + ": no PEM certificate in it"}},
		{name: "certificate without key", sec: Security{CertFile: "c.pem"},
			errs: []string{"--kafka-tls-cert-file and --kafka-tls-key-file go together: give both for a client certificate, or neither"}},
		{name: "user without mechanism", sec: Security{Username: "u"},
			errs: []string{"a Kafka SASL user or password is set but no --kafka-sasl-mechanism: choose PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"}},
		{name: "unknown mechanism", sec: Security{Mechanism: "GSSAPI"},
			errs: []string{`--kafka-sasl-mechanism "GSSAPI": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`}},
		{name: "mechanism without password", sec: Security{Mechanism: "SCRAM-SHA-512", Username: "u"},
			errs: []string{"--kafka-sasl-mechanism SCRAM-SHA-512 needs --kafka-sasl-username and a password in WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file"}},
		{name: "PLAIN without TLS refused", sec: Security{Mechanism: "PLAIN", Username: "u", Password: "p"},
			errs: []string{"--kafka-sasl-mechanism PLAIN without TLS sends the Kafka password in the clear: add --kafka-tls (and --kafka-tls-ca-file for a private CA), use SCRAM-SHA-512, or, if the network protects the connection, pass --kafka-allow-sasl-plain-without-tls"}},
		{name: "PLAIN without TLS allowed", sec: Security{Mechanism: "plain", Username: "u", Password: "p", AllowPlainWithoutTLS: true}, opts: 1,
			warnings: []string{"Kafka SASL PLAIN without TLS: the password is sent in the clear (allowed by --kafka-allow-sasl-plain-without-tls); add --kafka-tls"}},
		{name: "SCRAM without TLS", sec: Security{Mechanism: "SCRAM-SHA-256", Username: "u", PasswordFile: pwFile}, opts: 1,
			warnings: []string{"Kafka SASL SCRAM-SHA-256 without TLS: the password is not sent, but records and the session are unprotected and can be read or altered on the way; add --kafka-tls"}},
		{name: "SCRAM over TLS", sec: Security{TLS: true, Mechanism: "SCRAM-SHA-512", Username: "u", Password: "p"}, opts: 2},
		{name: "every mistake at once", sec: Security{CertFile: "c.pem", Mechanism: "PLAIN", PasswordFile: filepath.Join(dir, "nopw")},
			errs: []string{"--kafka-tls-cert-file and --kafka-tls-key-file go together", "--kafka-sasl-password-file: open ", "--kafka-sasl-mechanism PLAIN needs --kafka-sasl-username"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, warnings, err := c.sec.Resolve()
			if c.errs == nil && err != nil {
				t.Fatalf("error %v, want none", err)
			}
			for _, want := range c.errs {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one containing %q", err, want)
				}
			}
			if c.errs != nil {
				return
			}
			if got := len(conn.Opts()); got != c.opts {
				t.Errorf("%d client options, want %d", got, c.opts)
			}
			if strings.Join(warnings, "\n") != strings.Join(c.warnings, "\n") {
				t.Errorf("warnings %q, want %q", warnings, c.warnings)
			}
		})
	}
}

// TestConnOptsIsACopy: a caller appending to the options does not change
// another caller's.
func TestConnOptsIsACopy(t *testing.T) {
	conn, _, err := Security{TLS: true, Mechanism: "SCRAM-SHA-512", Username: "u", Password: "p"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	a := conn.Opts()
	_ = append(a[:1], nil)
	if b := conn.Opts(); b[1] == nil {
		t.Error("appending to one Opts changed the Conn's")
	}
}

func TestIsAuthFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("dial: %w", kerr.SaslAuthenticationFailed), true},
		{kerr.SaslAuthenticationFailed, true},
		{kerr.TopicAuthorizationFailed, false},
		{errors.New("SASL authentication failed"), false},
		{nil, false},
	} {
		if got := IsAuthFailure(c.err); got != c.want {
			t.Errorf("IsAuthFailure(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
