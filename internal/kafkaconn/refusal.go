package kafkaconn

import (
	"crypto/x509"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Refusal says whether err is Kafka refusing walrelay in a way that no retry
// heals: its authorizer denying an operation (an ACL to grant), the broker
// refusing the compression codec, or the broker's TLS certificate failing
// verification. hint is the setting to fix. always is true for the refusals
// that stay permanent after walrelay has delivered (an ACL revoked, a codec):
// the records that met them were not acknowledged, so nothing is confirmed
// past them, and retrying only repeats the refusal.
//
// N.B. a certificate error is a refusal only before walrelay has streamed
// (always false): a broker renewing its certificate, or a load balancer
// moving to a new broker, may present a wrong one for a moment.
//
// N.B. classified by kerr and the crypto/x509 and crypto/tls error types,
// never by message text. franz-go and walrelay wrap with %w all the way.
func Refusal(err error) (hint string, always bool, ok bool) {
	switch {
	case err == nil:
		return "", false, false
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return "Kafka's authorizer refused walrelay an operation on a topic (TOPIC_AUTHORIZATION_FAILED): grant walrelay's principal (User:<--kafka-sasl-username>) the ACLs of docs/security.md: WRITE and DESCRIBE on every outbox topic and the dead-letter topic, CREATE on them with --create-topics, DESCRIBE_CONFIGS to read their limits, and READ, WRITE and DESCRIBE on --checkpoint-topic, e.g. kafka-acls.sh --bootstrap-server BROKER --add --allow-principal User:NAME --operation Write --operation Describe --topic TOPIC", true, true
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "Kafka's authorizer refused walrelay a cluster operation (CLUSTER_AUTHORIZATION_FAILED): walrelay's idempotent producer needs IDEMPOTENT_WRITE on the cluster, which WRITE on any topic implies; grant walrelay's principal WRITE on its topics (docs/security.md), or kafka-acls.sh --bootstrap-server BROKER --add --allow-principal User:NAME --operation IdempotentWrite --cluster", true, true
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return "Kafka's authorizer refused walrelay its transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): grant walrelay's principal WRITE and DESCRIBE on the transactional id of --transactional-id (default walrelay-<slot>), e.g. kafka-acls.sh --bootstrap-server BROKER --add --allow-principal User:NAME --operation Write --operation Describe --transactional-id ID, or run without --exactly-once", true, true
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return "Kafka's authorizer refused walrelay a consumer group operation (GROUP_AUTHORIZATION_FAILED): grant walrelay's principal READ on the group (docs/security.md)", true, true
	case errors.Is(err, kerr.UnsupportedCompressionType):
		return "the broker does not take walrelay's compression codec (UNSUPPORTED_COMPRESSION_TYPE): set --kafka-compression to lz4 (the default), gzip, snappy or none", true, true
	}
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknownCA):
		return "the broker's TLS certificate is not signed by a CA walrelay trusts: set --kafka-tls-ca-file to the PEM file of the CA that signed it (default: the system's roots)", false, true
	case errors.As(err, &hostname):
		return "the broker's TLS certificate does not name the host walrelay dialed: fix --brokers to use a name in the certificate, or set --kafka-tls-server-name to it", false, true
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the broker's TLS certificate is expired or not yet valid: renew it on the broker (or fix this machine's clock)", false, true
	case errors.As(err, &invalid):
		return "the broker's TLS certificate is not valid for a server: give the broker a server certificate, with --kafka-tls-ca-file naming its CA", false, true
	}
	return "", false, false
}
