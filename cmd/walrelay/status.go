package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// statusCmd prints the slot's state and lag. It exits 2 when the slot is
// missing and 3 when it is lost.
func statusCmd(args []string, stdout, stderr io.Writer) int {
	var standbyURL string
	c, code := parseCommand("status", args, stderr, standbyFlag(&standbyURL), nil)
	if code >= 0 {
		return code
	}
	rc := c.rc
	if !pgTLSWarnings(c, standbyURL, stderr) {
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rc.ConnString)
	if err != nil {
		return connectFailed(stderr, err, rc.ConnString)
	}
	defer conn.Close(context.Background())
	st, err := pgcatalog.QuerySlot(ctx, conn, rc.Slot)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitRuntime
	}
	row := func(k, v string) { fmt.Fprintf(stdout, "%-22s %s\n", k, v) }
	row("slot", rc.Slot)
	if !st.Exists {
		row("exists", "no")
		fmt.Fprintf(stderr, "walrelay: replication slot %q does not exist: `walrelay setup` or `walrelay run --create` creates it\n", rc.Slot)
		return exitConfig
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
	rows, err := conn.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, rc.Publication)
	if err == nil {
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			if len(tables) == 0 {
				row("publication", rc.Publication+": missing or empty")
			} else {
				row("publication", rc.Publication+": "+strings.Join(tables, ", "))
			}
		}
	}
	failoverRows(ctx, row, rc, st, standbyURL)
	if st.WALStatus == "lost" {
		fmt.Fprintf(stderr, "walrelay: slot %q is lost: PostgreSQL removed WAL it still needed; events were lost (see the README's \"Slot lost\")\n", rc.Slot)
		return exitSlotLost
	}
	return exitOK
}

// failoverRows prints whether a failover keeps the slot: the slot's
// failover flag, the primary's synchronized_standby_slots, and the
// standby's copy of the slot when standbyURL names it.
func failoverRows(ctx context.Context, row func(k, v string), rc replication.Config, st pgcatalog.SlotStatus, standbyURL string) {
	if st.ServerVersion < 170000 {
		row("failover", fmt.Sprintf("not possible: PostgreSQL %d has no failover slots (17+); a failover to a standby loses the slot", st.ServerVersion/10000))
		return
	}
	switch {
	case st.Failover:
		row("failover", "yes")
	case st.Active:
		row("failover", "no: run "+pgcatalog.AlterFailoverSQL(rc.Slot)+" over a replication connection when no one streams the slot (walrelay run does it before streaming)")
	default:
		row("failover", "no: walrelay run makes it a failover slot before streaming ("+pgcatalog.AlterFailoverSQL(rc.Slot)+")")
	}
	if st.StandbySlots == "" {
		row("synchronized_standby_slots", "empty: walrelay may get ahead of the standby, and a failover then loses what it relayed and the standby never received")
	} else {
		row("synchronized_standby_slots", st.StandbySlots)
	}
	if standbyURL == "" {
		return
	}
	ss, err := pgcatalog.QueryStandbySlot(ctx, standbyURL, rc.Slot)
	if err != nil {
		row("standby", err.Error())
		return
	}
	if problems := ss.Problems(rc.Slot); len(problems) > 0 {
		row("standby", "NOT READY: "+strings.Join(problems, "; "))
		return
	}
	row("standby", fmt.Sprintf("synced, confirmed_flush_lsn %s, %d bytes behind the primary's slot", ss.Confirmed, int64(st.Confirmed)-int64(ss.Confirmed)))
}
