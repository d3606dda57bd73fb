package kafkaconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRefusal(t *testing.T) {
	// N.B. each error wrapped as it reaches the pipeline: walrelay's
	// "verb noun: %w" around franz-go's own wrapping.
	wrap := func(err error) error {
		return fmt.Errorf("produce to topic outbox.event.x partition 0: %w", fmt.Errorf("unable to dial: %w", err))
	}
	tlsErr := func(err error) error { return &tls.CertificateVerificationError{Err: err} }
	for _, c := range []struct {
		name   string
		err    error
		want   string // in the hint; "" for no refusal
		always bool
	}{
		{"topic ACL", kerr.TopicAuthorizationFailed, "--operation Write --operation Describe --topic", true},
		{"cluster ACL", kerr.ClusterAuthorizationFailed, "--operation IdempotentWrite --cluster", true},
		{"transactional id ACL", kerr.TransactionalIDAuthorizationFailed, "--transactional-id ID", true},
		{"group ACL", kerr.GroupAuthorizationFailed, "READ on the group", true},
		{"compression", kerr.UnsupportedCompressionType, "set --kafka-compression", true},
		{"unknown CA", tlsErr(x509.UnknownAuthorityError{}), "set --kafka-tls-ca-file", false},
		{"host name", tlsErr(x509.HostnameError{Host: "kafka.invalid"}), "--kafka-tls-server-name", false},
		{"expired", tlsErr(x509.CertificateInvalidError{Reason: x509.Expired}), "expired or not yet valid", false},
		{"not a server certificate", tlsErr(x509.CertificateInvalidError{Reason: x509.IncompatibleUsage}), "not valid for a server", false},
		{"retriable Kafka error", kerr.NotLeaderForPartition, "", false},
		{"SASL login (IsAuthFailure's)", kerr.SaslAuthenticationFailed, "", false},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, "", false},
		{"nil", nil, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.err
			if err != nil {
				err = wrap(err)
			}
			hint, always, ok := Refusal(err)
			if ok != (c.want != "") || !strings.Contains(hint, c.want) || always != c.always {
				t.Errorf("Refusal(%v) = %q, always %v, ok %v; want a hint with %q, always %v", err, hint, always, ok, c.want, c.always)
			}
		})
	}
}
