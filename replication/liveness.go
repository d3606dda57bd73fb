package replication

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// livenessDeadline is how long the replication connection may stay silent,
// not even answering a status update that asks for a reply, before walrelay
// takes it for dead: four status intervals, or the server's
// wal_sender_timeout when that is longer (0: the server's timeout is
// disabled).
//
// N.B. the walsender answers a request for a reply only between the WAL
// records it decodes; decoding a large transaction of other tables, or one
// the publication filters out, can keep it from answering for long. The
// server itself waits wal_sender_timeout for walrelay before it ends the
// connection, and sends keepalives at half of it: a DBA who set it high
// said the server may be that quiet, and taking the connection for dead
// sooner restarts a healthy stream.
func livenessDeadline(statusInterval, walSenderTimeout time.Duration) time.Duration {
	return max(4*statusInterval, walSenderTimeout)
}

// walSenderTimeout reads wal_sender_timeout on the replication connection
// (SHOW, which a walsender answers), as the server applies it to this
// connection: the server's setting, or the role's or database's.
func walSenderTimeout(ctx context.Context, conn *pgconn.PgConn) (time.Duration, error) {
	res, err := conn.Exec(ctx, "SHOW wal_sender_timeout").ReadAll()
	if err != nil {
		return 0, fmt.Errorf("show wal_sender_timeout: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return 0, fmt.Errorf("show wal_sender_timeout: want one value, got %d results", len(res))
	}
	return parseGUCMillis(string(res[0].Rows[0][0]))
}

// parseGUCMillis parses a time setting as SHOW prints it ("60s", "1min",
// "500ms", "0"; a bare number is milliseconds, wal_sender_timeout's unit).
func parseGUCMillis(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '-' })
	num, unit := v, ""
	if i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse time setting %q: %w", v, err)
	}
	units := map[string]time.Duration{"": time.Millisecond, "ms": time.Millisecond, "s": time.Second,
		"min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	u, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("parse time setting %q: unknown unit %q", v, unit)
	}
	if n <= 0 {
		return 0, nil
	}
	return time.Duration(n) * u, nil
}
