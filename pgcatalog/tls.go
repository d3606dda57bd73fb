package pgcatalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

// tls is the "PostgreSQL TLS" step: the effective sslmode of each host,
// whether the SQL connection and a replication connection actually run
// over TLS, and a warning for a host that is exposed (Validate refused it
// already under RequireVerifiedTLS).
func (p *prep) tls(ctx context.Context) (string, error) {
	hosts, warnings, err := replication.TLSPolicy("--pg-url", p.cfg.ConnString, p.cfg.RequireVerifiedTLS)
	if err != nil {
		return "", err
	}
	live := func(c *pgconn.PgConn) string {
		if ok, v := replication.LiveTLS(c); ok {
			return v
		}
		return "no TLS"
	}
	sqlTLS := live(p.conn.PgConn())
	// N.B. a replication connection of its own, closed at once: the one
	// that streams is opened later (its "streaming" line says whether it
	// uses TLS); a role without REPLICATION is the next step's failure.
	replTLS := "not opened"
	if rc, err := replication.ConnectReplication(ctx, p.cfg); err == nil {
		replTLS = live(rc)
		rc.Close(context.WithoutCancel(ctx))
	}
	note := fmt.Sprintf("%s; SQL connection: %s, replication connection: %s", replication.DescribeTLS(hosts), sqlTLS, replTLS)
	if !p.dryRun {
		p.log.Info("postgresql tls", zap.String("hosts", replication.DescribeTLS(hosts)), zap.String("sql_connection", sqlTLS), zap.String("replication_connection", replTLS))
		for _, w := range warnings {
			// N.B. loud: at every start, at warn level, until it is fixed.
			p.log.Warn("postgresql connection not verified: "+w, zap.String("sslmode", hosts[0].Mode))
		}
	}
	p.warnings = append(p.warnings, warnings...)
	return note, nil
}
