package pgcatalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// StatusRow is one line of `walrelay status`: a name and its value.
type StatusRow struct{ Name, Value string }

// Status reads the slot's state and lag, the publication's tables, whether
// a failover keeps the slot and, when standbyURL is set, the standby's copy
// of it: the rows `walrelay status` prints. When the slot does not exist,
// the rows say so and end there.
func (c *CommandConn) Status(ctx context.Context, slot, publication, standbyURL string) (SlotStatus, []StatusRow, error) {
	st, err := QuerySlot(ctx, c.conn, slot)
	if err != nil {
		return st, nil, err
	}
	var rows []StatusRow
	row := func(k, v string) { rows = append(rows, StatusRow{k, v}) }
	row("slot", slot)
	if !st.Exists {
		row("exists", "no")
		return st, rows, nil
	}
	active := "no"
	if st.Active {
		active = "yes"
	}
	row("active", active)
	row("confirmed_flush_lsn", st.Confirmed.String())
	row("lag_bytes", fmt.Sprint(st.LagBytes))
	row("wal_status", st.WALStatus)
	if st.SafeWALSize != nil {
		row("safe_wal_size", fmt.Sprint(*st.SafeWALSize))
	} else {
		row("safe_wal_size", "unlimited (max_slot_wal_keep_size = -1)")
	}
	if tables, err := c.publicationTables(ctx, publication); err == nil {
		if len(tables) == 0 {
			row("publication", publication+": missing or empty")
		} else {
			row("publication", publication+": "+strings.Join(tables, ", "))
		}
	}
	failoverRows(ctx, row, slot, st, standbyURL)
	return st, rows, nil
}

// publicationTables are the tables the publication lists, as schema.table,
// sorted; none when it is missing or empty.
func (c *CommandConn) publicationTables(ctx context.Context, publication string) ([]string, error) {
	rows, err := c.conn.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, publication)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// failoverRows adds whether a failover keeps the slot: the slot's
// failover flag, the primary's synchronized_standby_slots, and the
// standby's copy of the slot when standbyURL names it.
func failoverRows(ctx context.Context, row func(k, v string), slot string, st SlotStatus, standbyURL string) {
	if st.ServerVersion < 170000 {
		row("failover", fmt.Sprintf("not possible: PostgreSQL %d has no failover slots (17+); a failover to a standby loses the slot", st.ServerVersion/10000))
		return
	}
	switch {
	case st.Failover:
		row("failover", "yes")
	case st.Active:
		row("failover", "no: run "+AlterFailoverSQL(slot)+" over a replication connection when no one streams the slot (walrelay run does it before streaming)")
	default:
		row("failover", "no: walrelay run makes it a failover slot before streaming ("+AlterFailoverSQL(slot)+")")
	}
	if st.StandbySlots == "" {
		row("synchronized_standby_slots", "empty: walrelay may get ahead of the standby, and a failover then loses what it relayed and the standby never received")
	} else {
		row("synchronized_standby_slots", st.StandbySlots)
	}
	if standbyURL == "" {
		return
	}
	ss, err := QueryStandbySlot(ctx, standbyURL, slot)
	if err != nil {
		row("standby", err.Error())
		return
	}
	if problems := ss.Problems(slot); len(problems) > 0 {
		row("standby", "NOT READY: "+strings.Join(problems, "; "))
		return
	}
	row("standby", fmt.Sprintf("synced, confirmed_flush_lsn %s, %d bytes behind the primary's slot", ss.Confirmed, int64(st.Confirmed)-int64(ss.Confirmed)))
}
