package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/test/harness"
)

// TestStreamRefusesAnotherTimeline: the exactly-once pipeline reads the
// server's timeline before the stream connects; a stream that finds its
// server on another timeline (a failover in between) does not start
// replication: the checkpoint would be judged against the wrong history.
// Unlike the package's other tests it drives replication.Stream itself, on
// the real server: the race it guards against (a failover between two
// connections of one start) cannot be timed from outside the binary.
func TestStreamRefusesAnotherTimeline(t *testing.T) {
	t.Parallel()
	e := harness.NewEnv(t, relayBin)
	e.Bed.Exec(t, e.DSN, "CREATE PUBLICATION "+e.Pub+" FOR TABLE outbox")
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	var tli int32
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`).Scan(&tli); err != nil {
		t.Fatal(err)
	}
	at := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
	s := replication.New(replication.Config{ConnString: e.DSN, Slot: e.Slot, Publication: e.Pub}, checkpoint.New(at), zap.NewNop())
	s.ExpectTimeline(tli + 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := s.Run(ctx, nil, at, make(chan []replication.Message, 16), nil)
	if want := fmt.Sprintf("the server is on timeline %d, not %d", tli, tli+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("stream expecting timeline %d on a server of timeline %d: %v, want an error saying %q", tli+1, tli, err, want)
	}
	if s.Streamed() {
		t.Errorf("the stream started replication on the wrong timeline")
	}
}
