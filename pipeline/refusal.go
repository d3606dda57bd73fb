package pipeline

import (
	"github.com/walrelay/walrelay/internal/kafkaconn"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// refusedError is a server refusing walrelay's credentials or database
// before walrelay ever streamed: a configuration mistake, not an outage.
type refusedError struct {
	err  error
	hint string
}

func (e *refusedError) Error() string        { return e.err.Error() + ": " + e.hint }
func (e *refusedError) Unwrap() error        { return e.err }
func (e *refusedError) Is(target error) bool { return target == replication.ErrSetup }

// RefusalHint says whether err is PostgreSQL or Kafka refusing who walrelay is
// or what it asks for at login (a wrong password, an unknown role or
// database, a failed SASL authentication, a server certificate walrelay
// does not trust) or later (an ACL missing, a compression codec), and what to
// fix: a setup error while walrelay has never streamed, and, for the Kafka
// refusals that RefusedAlways reports, after too.
//
// N.B. classified by SQLSTATE, kerr and the x509 error types only
// (kafkaconn.IsAuthFailure, kafkaconn.Refusal). A host that refuses the
// connection, does not resolve or times out is not among them: a server
// starting after walrelay (compose, Kubernetes) or failing over looks the
// same, and walrelay retries it (logging that it never connected). Once
// walrelay has streamed, the login refusals and certificate errors are
// retried too: a password rotated on the server before walrelay's secret, a
// role re-created, a certificate being renewed, heal without a restart.
func RefusalHint(err error, connString string) (hint string, ok bool) {
	// A PostgreSQL error is classified by its SQLSTATE alone.
	if pgcatalog.IsPostgresError(err) {
		return pgcatalog.LoginRefusal(err, connString)
	}
	// N.B. before the Kafka refusals: a certificate PostgreSQL presents
	// fails with the same x509 errors as a broker's.
	if pgcatalog.ConnectFailed(err) {
		return pgcatalog.CertRefusal(err, connString)
	}
	if kafkaconn.IsAuthFailure(err) {
		return "Kafka refused the SASL login: fix --kafka-sasl-username and the password (WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file), or --kafka-sasl-mechanism", true
	}
	if hint, _, ok := kafkaconn.Refusal(err); ok {
		return hint, true
	}
	return "", false
}

// RefusedAlways reports whether err is a refusal that stops the relay even
// after it has streamed: Kafka's authorizer denying an operation (an ACL
// revoked while walrelay ran) or the compression codec. Retrying only
// repeats it.
//
// N.B. exit 2 is safe then: the records Kafka refused were not
// acknowledged, so the slot was confirmed before them, never past.
func RefusedAlways(err error) bool {
	_, always, ok := kafkaconn.Refusal(err)
	return ok && always
}

// connectFailed reports whether err is a failure to open a PostgreSQL
// connection (as opposed to one that failed after it was open).
func connectFailed(err error) bool { return pgcatalog.ConnectFailed(err) }
