package pipeline

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"

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
// database, a failed SASL authentication), and what to fix: a setup error
// while walrelay has never streamed.
//
// N.B. classified by SQLSTATE and kerr only. A host that refuses the
// connection, does not resolve or times out is not among them: a server
// starting after walrelay (compose, Kubernetes) or failing over looks the
// same, and walrelay retries it (logging that it never connected). Once
// walrelay has streamed, these are retried too: a password rotated on the
// server before walrelay's secret, a role re-created, heal without a restart.
func RefusalHint(err error, connString string) (hint string, ok bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		where := where(connString)
		switch pgErr.Code {
		case "28P01": // invalid_password
			return "PostgreSQL refused the password: fix the password in --pg-url (WALRELAY_PG_URL, or the file of --pg-url-file)" + where, true
		case "28000": // invalid_authorization_specification: unknown role, or no pg_hba.conf entry
			return "PostgreSQL refused the login (an unknown role, or no pg_hba.conf line for this host, user and database): fix the user in --pg-url (WALRELAY_PG_URL, or the file of --pg-url-file), or add the pg_hba.conf line `walrelay setup --print` shows" + where, true
		case "3D000": // invalid_catalog_name
			return "the database does not exist: fix the database in --pg-url (WALRELAY_PG_URL, or the file of --pg-url-file)" + where, true
		}
		return "", false
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) {
		return "Kafka refused the SASL login: fix --kafka-sasl-username and the password (WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file), or --kafka-sasl-mechanism", true
	}
	return "", false
}

// describeConn names where a connection string connects, without its
// password: "host H port P, database D, user U", or "" when it does not
// parse.
func describeConn(connString string) string {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("host %s port %d, database %q, user %q", cfg.Host, cfg.Port, cfg.Database, cfg.User)
}

// where is describeConn in parentheses with a leading space, or "".
func where(connString string) string {
	if d := describeConn(connString); d != "" {
		return " (" + d + ")"
	}
	return ""
}

// connectFailed reports whether err is a failure to open a PostgreSQL
// connection (as opposed to one that failed after it was open).
func connectFailed(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}
