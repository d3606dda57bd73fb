package pgcatalog

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// LoginRefusal says whether err is PostgreSQL refusing who walrelay is or
// what it asks for at login (a wrong password, an unknown role or
// database), and what to fix, naming where connString connects (without its
// password).
//
// N.B. classified by SQLSTATE only: a host that refuses the connection,
// does not resolve or times out is not among them (the pipeline retries
// it).
func LoginRefusal(err error, connString string) (hint string, ok bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", false
	}
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

// IsPostgresError reports whether err carries an error PostgreSQL sent
// (a SQLSTATE).
func IsPostgresError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// DescribeConn names where a connection string connects, without its
// password: "host H port P, database D, user U", or "" when it does not
// parse.
func DescribeConn(connString string) string {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("host %s port %d, database %q, user %q", cfg.Host, cfg.Port, cfg.Database, cfg.User)
}

// where is DescribeConn in parentheses with a leading space, or "".
func where(connString string) string {
	if d := DescribeConn(connString); d != "" {
		return " (" + d + ")"
	}
	return ""
}

// ConnectFailed reports whether err is a failure to open a PostgreSQL
// connection (as opposed to one that failed after it was open).
func ConnectFailed(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}
