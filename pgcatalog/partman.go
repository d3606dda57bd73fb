package pgcatalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/preflight"
	"github.com/walrelay/walrelay/replication"
)

// PartmanCheck is `walrelay check`'s "outbox retention (pg_partman)": for
// each outbox that pg_partman maintains (its part_config), the interval,
// premake and retention, and a warning when a time retention is shorter
// than window plus margin (--recovery-window, --recover-margin: how far
// back a recovery from the table reads). ok is false when pg_partman
// maintains none of tables.
func PartmanCheck(ctx context.Context, connString string, tables []string, window, margin time.Duration) (ch preflight.Check, ok bool) {
	ch.Name = "outbox retention (pg_partman)"
	conn, err := replication.ConnectSQL(ctx, connString)
	if err != nil {
		return ch, false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	err = conn.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_partman'`).Scan(&schema)
	if err != nil {
		return ch, false // not installed (or not readable): nothing to say
	}
	// N.B. part_config's parent_table is schema-qualified, as --table is.
	rows, err := conn.Query(ctx, `SELECT parent_table, control, partition_interval, premake, coalesce(retention, ''), coalesce(retention_keep_table, true),
		CASE WHEN retention ~ '^\s*[0-9]+\s*$' THEN NULL ELSE extract(epoch FROM retention::interval) END
		FROM `+pgx.Identifier{schema, "part_config"}.Sanitize()+` WHERE parent_table = ANY($1) ORDER BY parent_table`, tables)
	if err != nil {
		ch.Err = fmt.Errorf("read pg_partman's part_config: %w", err)
		return ch, true
	}
	defer rows.Close()
	var notes []string
	for rows.Next() {
		var parent, control, interval, retention string
		var premake int
		var keep bool
		var seconds *float64
		if err := rows.Scan(&parent, &control, &interval, &premake, &retention, &keep, &seconds); err != nil {
			ch.Err = fmt.Errorf("read pg_partman's part_config: %w", err)
			return ch, true
		}
		note := fmt.Sprintf("%s by %s, %s a partition, %d made ahead", parent, control, interval, premake)
		switch {
		case retention == "":
			note += ", no retention (partitions are kept)"
		case keep:
			note += fmt.Sprintf(", retention %s (detached, kept as tables)", retention)
		default:
			note += fmt.Sprintf(", retention %s (dropped)", retention)
		}
		notes = append(notes, note)
		if retention == "" || keep {
			continue
		}
		if seconds == nil {
			ch.Warnings = append(ch.Warnings, fmt.Sprintf("pg_partman drops the partitions of %s more than %s values of %s behind the newest: walrelay cannot tell how long that is; keep at least the recovery window (%s, --recovery-window) plus --recover-margin (%s) of rows, since a recovery from the table after a slot loss reads the rows committed since the slot's last confirmed position, and a dropped partition takes its rows with it (docs/operate.md, \"Retention\")",
				parent, strings.TrimSpace(retention), control, fmtWindow(window), margin))
			continue
		}
		if d := time.Duration(*seconds * float64(time.Second)); d < window+margin {
			// N.B. the fix in whole days, rounded up: an interval
			// PostgreSQL reads, never shorter than needed.
			days := (window + margin + 24*time.Hour - 1) / (24 * time.Hour)
			ch.Warnings = append(ch.Warnings, fmt.Sprintf("pg_partman drops the partitions of %s older than %s, less than the recovery window (%s, --recovery-window) plus --recover-margin (%s): rows committed since the slot's last confirmed position may be gone before a recovery from the table reads them; keep them longer: UPDATE %s SET retention = '%d days' WHERE parent_table = '%s'; (docs/operate.md, \"Retention\")",
				parent, retention, fmtWindow(window), margin, pgx.Identifier{schema, "part_config"}.Sanitize(), days, parent))
		}
	}
	if err := rows.Err(); err != nil {
		ch.Err = fmt.Errorf("read pg_partman's part_config: %w", err)
		return ch, true
	}
	if len(notes) == 0 {
		return ch, false
	}
	ch.Note = strings.Join(notes, "; ")
	return ch, true
}

// fmtWindow renders a window in days when it is whole days.
func fmtWindow(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}
