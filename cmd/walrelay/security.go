package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// kafkaSecurity is how walrelay authenticates to Kafka and protects the
// connection.
type kafkaSecurity struct {
	tls          bool
	caFile       string
	certFile     string
	keyFile      string
	serverName   string
	mechanism    string
	username     string
	password     string // from WALRELAY_KAFKA_SASL_PASSWORD, never a flag
	passwordFile string
	// allowPlainWithoutTLS is --kafka-allow-sasl-plain-without-tls.
	allowPlainWithoutTLS bool
}

// options turns the settings into franz-go options, reading the files. The
// warnings are about what is allowed but unprotected, for the commands that
// use Kafka to log.
func (k *kafkaSecurity) options() ([]kgo.Opt, []string, error) {
	var opts []kgo.Opt
	var warnings []string
	var errs []error
	useTLS := k.tls || k.caFile != "" || k.certFile != "" || k.keyFile != ""
	if useTLS {
		// N.B. hostname verification stays on: the certificate must name
		// the broker (or --kafka-tls-server-name).
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: k.serverName}
		if k.caFile != "" {
			pem, err := os.ReadFile(k.caFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("--kafka-tls-ca-file: %w", err))
			} else {
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					errs = append(errs, fmt.Errorf("--kafka-tls-ca-file %s: no PEM certificate in it", k.caFile))
				}
				cfg.RootCAs = pool
			}
		}
		if (k.certFile == "") != (k.keyFile == "") {
			errs = append(errs, errors.New("--kafka-tls-cert-file and --kafka-tls-key-file go together: give both for a client certificate, or neither"))
		} else if k.certFile != "" {
			cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("client certificate: %w", err))
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		opts = append(opts, kgo.Dialer(dialer.DialContext))
	}
	password := k.password
	if k.passwordFile != "" {
		b, err := os.ReadFile(k.passwordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--kafka-sasl-password-file: %w", err))
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	switch strings.ToUpper(k.mechanism) {
	case "":
		if k.username != "" || password != "" {
			errs = append(errs, errors.New("a Kafka SASL user or password is set but no --kafka-sasl-mechanism: choose PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if k.username == "" || password == "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-username and a password in WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file", k.mechanism))
			break
		}
		// N.B. PLAIN sends the password itself: over plaintext anyone on
		// the path reads it, so it takes an explicit opt-in. SCRAM never
		// sends the password, but without TLS the records, and the session
		// after the login, are unprotected.
		switch mech := strings.ToUpper(k.mechanism); {
		case useTLS:
		case mech == "PLAIN" && !k.allowPlainWithoutTLS:
			errs = append(errs, errors.New("--kafka-sasl-mechanism PLAIN without TLS sends the Kafka password in the clear: add --kafka-tls (and --kafka-tls-ca-file for a private CA), use SCRAM-SHA-512, or, if the network protects the connection, pass --kafka-allow-sasl-plain-without-tls"))
		case mech == "PLAIN":
			warnings = append(warnings, "Kafka SASL PLAIN without TLS: the password is sent in the clear (allowed by --kafka-allow-sasl-plain-without-tls); add --kafka-tls")
		default:
			warnings = append(warnings, "Kafka SASL "+mech+" without TLS: the password is not sent, but records and the session are unprotected and can be read or altered on the way; add --kafka-tls")
		}
		switch strings.ToUpper(k.mechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: k.username, Pass: password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: k.username, Pass: password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: k.username, Pass: password}.AsSha512Mechanism()))
		}
	default:
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.mechanism))
	}
	return opts, warnings, errors.Join(errs...)
}
