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
}

// options turns the settings into franz-go options, reading the files.
func (k *kafkaSecurity) options() ([]kgo.Opt, error) {
	var opts []kgo.Opt
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
		if !useTLS {
			// SASL over plaintext sends PLAIN passwords in the clear; allowed
			// (some networks terminate TLS elsewhere) but worth knowing.
			fmt.Fprintln(os.Stderr, "walrelay: warning: Kafka SASL without --kafka-tls")
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
	return opts, errors.Join(errs...)
}
