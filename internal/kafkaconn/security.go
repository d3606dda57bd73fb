package kafkaconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how walrelay authenticates to Kafka and protects the
// connection: the --kafka-tls* and --kafka-sasl-* settings.
type Security struct {
	// TLS connects over TLS; on by itself when a file below is given.
	TLS bool
	// CAFile is the PEM file of the CA that signed the brokers'
	// certificates. Default "": the system's roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, both
	// or neither.
	CertFile string
	KeyFile  string
	// ServerName is the host name to verify in the brokers' certificates.
	// Default "": the host dialed.
	ServerName string
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Default "": no
	// SASL.
	Mechanism string
	Username  string
	// Password is from WALRELAY_KAFKA_SASL_PASSWORD, never a flag;
	// PasswordFile, when set, holds it instead.
	Password     string
	PasswordFile string
	// AllowPlainWithoutTLS is --kafka-allow-sasl-plain-without-tls.
	AllowPlainWithoutTLS bool
}

// Conn is how walrelay's clients reach Kafka: the TLS dialer and the SASL
// mechanism of a Security, its files read. The zero Conn is plaintext
// without SASL.
type Conn struct{ opts []kgo.Opt }

// Opts are the client options of c, a new slice on each call.
func (c Conn) Opts() []kgo.Opt { return slices.Clone(c.opts) }

// Resolve checks the settings and reads the files, once. The warnings are
// about what is allowed but unprotected, for the commands that use Kafka to
// log. The error names every mistake (errors.Join).
func (k Security) Resolve() (Conn, []string, error) {
	var opts []kgo.Opt
	var warnings []string
	var errs []error
	useTLS := k.TLS || k.CAFile != "" || k.CertFile != "" || k.KeyFile != ""
	if useTLS {
		// N.B. hostname verification stays on: the certificate must name
		// the broker (or --kafka-tls-server-name).
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: k.ServerName}
		if k.CAFile != "" {
			pem, err := os.ReadFile(k.CAFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("--kafka-tls-ca-file: %w", err))
			} else {
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					errs = append(errs, fmt.Errorf("--kafka-tls-ca-file %s: no PEM certificate in it", k.CAFile))
				}
				cfg.RootCAs = pool
			}
		}
		if (k.CertFile == "") != (k.KeyFile == "") {
			errs = append(errs, errors.New("--kafka-tls-cert-file and --kafka-tls-key-file go together: give both for a client certificate, or neither"))
		} else if k.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(k.CertFile, k.KeyFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("client certificate: %w", err))
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		opts = append(opts, kgo.Dialer(dialer.DialContext))
	}
	password := k.Password
	if k.PasswordFile != "" {
		b, err := os.ReadFile(k.PasswordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--kafka-sasl-password-file: %w", err))
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	switch strings.ToUpper(k.Mechanism) {
	case "":
		if k.Username != "" || password != "" {
			errs = append(errs, errors.New("a Kafka SASL user or password is set but no --kafka-sasl-mechanism: choose PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if k.Username == "" || password == "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-username and a password in WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file", k.Mechanism))
			break
		}
		// N.B. PLAIN sends the password itself: over plaintext anyone on
		// the path reads it, so it takes an explicit opt-in. SCRAM never
		// sends the password, but without TLS the records, and the session
		// after the login, are unprotected.
		switch mech := strings.ToUpper(k.Mechanism); {
		case useTLS:
		case mech == "PLAIN" && !k.AllowPlainWithoutTLS:
			errs = append(errs, errors.New("--kafka-sasl-mechanism PLAIN without TLS sends the Kafka password in the clear: add --kafka-tls (and --kafka-tls-ca-file for a private CA), use SCRAM-SHA-512, or, if the network protects the connection, pass --kafka-allow-sasl-plain-without-tls"))
		case mech == "PLAIN":
			warnings = append(warnings, "Kafka SASL PLAIN without TLS: the password is sent in the clear (allowed by --kafka-allow-sasl-plain-without-tls); add --kafka-tls")
		default:
			warnings = append(warnings, "Kafka SASL "+mech+" without TLS: the password is not sent, but records and the session are unprotected and can be read or altered on the way; add --kafka-tls")
		}
		switch strings.ToUpper(k.Mechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: k.Username, Pass: password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: k.Username, Pass: password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: k.Username, Pass: password}.AsSha512Mechanism()))
		}
	default:
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.Mechanism))
	}
	return Conn{opts: opts}, warnings, errors.Join(errs...)
}

// IsAuthFailure reports whether err is Kafka refusing the SASL login
// (kerr.SaslAuthenticationFailed): a wrong user, password or mechanism.
func IsAuthFailure(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) }
