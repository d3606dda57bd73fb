package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/internal/preflight"
	"github.com/walrelay/walrelay/replication"
)

// StandbyCheck is `walrelay check`'s "standby has the slot synchronized":
// whether a promotion of the standby at standbyURL keeps slot, and how far
// its copy is behind the primary's (at connString).
func StandbyCheck(ctx context.Context, connString, slot, standbyURL string) preflight.Check {
	ch := preflight.Check{Name: "standby has the slot synchronized"}
	ss, err := QueryStandbySlot(ctx, standbyURL, slot)
	if err != nil {
		ch.Err = err
		return ch
	}
	if problems := ss.Problems(slot); len(problems) > 0 {
		ch.Err = errors.New(strings.Join(problems, "; "))
		return ch
	}
	ch.Note = fmt.Sprintf("synced, confirmed_flush_lsn %s", ss.Confirmed)
	if behind, ok := standbyBehind(ctx, connString, slot, ss); ok {
		ch.Note += fmt.Sprintf(", %d bytes behind the primary's slot (relayed again after a promotion)", behind)
	}
	return ch
}

// standbyBehind is how many bytes the standby's copy of the slot is behind
// the primary's.
func standbyBehind(ctx context.Context, connString, slot string, ss StandbySlot) (int64, bool) {
	conn, err := replication.ConnectSQL(ctx, connString)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := QuerySlot(ctx, conn, slot)
	if err != nil || !st.Exists {
		return 0, false
	}
	return int64(st.Confirmed) - int64(ss.Confirmed), true
}
