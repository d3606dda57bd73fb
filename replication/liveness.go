package replication

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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

// ParseTimeSetting parses a time setting as PostgreSQL prints it ("60s",
// "1min", "500ms", "0"; a bare number is milliseconds, wal_sender_timeout's
// unit); 0 or less (disabled) is 0.
func ParseTimeSetting(v string) (time.Duration, error) {
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
