package replication

import "github.com/jackc/pgx/v5/pgconn"

// Database is the name of the database ConnString connects to, and so the
// one the slot streams from: the URL's or dbname's, PGDATABASE's, else
// PostgreSQL's default, the user's name; "" when ConnString does not parse
// (Validate says why).
func (c Config) Database() string {
	pc, err := pgconn.ParseConfig(c.ConnString)
	if err != nil {
		return ""
	}
	if pc.Database != "" {
		return pc.Database
	}
	return pc.User
}
