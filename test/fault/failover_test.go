package fault

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestFailoverRoundTrips: PostgreSQL 17 with a physical standby that
// synchronizes failover slots; writers commit throughout and walrelay streams
// on the multi-host URL. Each round kills the primary (SIGKILL to the
// server), promotes the standby, and rebuilds the old primary as the new
// standby (the new primary is stopped cleanly for the copy of its data
// directory), so the next round fails back. walrelay follows every
// promotion on the synchronized slot and never creates one; every event the
// last primary has is in Kafka (lost 0, phantom 0, per-key order). Two
// rounds (there and back); six under WALRELAY_CHAOS=1.
func TestFailoverRoundTrips(t *testing.T) {
	t.Parallel()
	rounds := scale(2, 6)
	pair := testbed.StartPGPair(t, "17")
	bed := testbed.Get(t)
	const db = "failover"
	bed.Exec(t, pair.PrimaryURL("postgres"), "CREATE DATABASE "+db)
	bed.Exec(t, pair.PrimaryURL(db), harness.OutboxDDL)
	pair.WaitReplayed(t)
	e := &harness.Env{Bed: bed, Bin: relayBin, DSN: pair.URL(db), Slot: "s_" + harness.Uniq(), Pub: "p_" + harness.Uniq(), Prefix: "t" + harness.Uniq()}
	w := defaultWorkload(0)
	w.Writers, w.Pause = 2, 5*time.Millisecond
	w.Prepare(t, e)
	relay := e.StartRelay(t)
	relay.WaitStreaming()
	writing := w.Start(e)
	defer writing.Stop()
	waitMore := func(n int64) {
		t.Helper()
		target := w.Committed() + n
		harness.WaitFor(t, 3*time.Minute, fmt.Sprintf("the writers to commit %d more events", n), func() bool {
			if relay.Exited() {
				t.Fatalf("walrelay exited: %v", relay.Err())
			}
			return w.Committed() >= target
		})
	}
	var resumed []string
	for i := 0; i < rounds; i++ {
		begin := time.Now()
		standby := pair.StandbyURL(db)
		harness.WaitFor(t, 3*time.Minute, "the slot to be synchronized to the standby", func() bool {
			var ready bool
			err := bed.QueryRow(t, standby, `SELECT synced AND NOT temporary AND invalidation_reason IS NULL
				FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&ready)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				t.Fatal(err)
			}
			return ready
		})
		t.Logf("round %d: the slot is synchronized to the standby after %s", i+1, time.Since(begin).Round(time.Millisecond))
		waitMore(int64(scale(2000, 10000)))
		killed := time.Now()
		pair.KillPrimary(t)
		pair.Promote(t)
		relay.WaitStreaming()
		resumed = append(resumed, time.Since(killed).Round(time.Millisecond).String())
		waitMore(1000)
		if i < rounds-1 {
			begin := time.Now()
			pair.Rebuild(t)
			t.Logf("round %d: the old primary rebuilt as the standby in %s", i+1, time.Since(begin).Round(time.Millisecond))
		}
	}
	if err := writing.Stop(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	end := bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, 3*time.Minute, "walrelay to confirm the last commit", func() bool {
		return bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
	rows := e.CommittedRows(t)
	rep := harness.Check(harness.History{Committed: harness.EventsOf(rows), Records: harness.FromKafka(bed.ConsumeAll(t, e.Topics(), time.Second)), RolledBack: w.RolledBack()})
	created := strings.Count(relay.Log(), `"msg":"created replication slot"`)
	t.Logf("RESULT %s rounds=%d events=%d records=%d lost=%d phantom=%d order_violations=%d duplicates=%d kill_to_streaming=[%s] slot_created=%d",
		t.Name(), rounds, rep.Events, rep.Records, rep.Lost, rep.Phantom, rep.OrderViolations, rep.Duplicates, strings.Join(resumed, " "), created)
	if rep.Lost+rep.Phantom+rep.OrderViolations > 0 {
		t.Errorf("invariants violated: %s", rep.Summary())
	}
	if created != 1 {
		t.Errorf("walrelay created the slot %d times, want once (at the first start)", created)
	}
	stopRelay(t, relay)
}
