package failover

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestFailoverReadyAtOnce: a fresh PostgreSQL 17 pair, walrelay creating
// its failover slot with --pg-standby-url (given as WALRELAY_PG_STANDBY_URL,
// which earlier releases took silently, so that WALRELAY_TEST_BIN can
// measure one), two writers committing from the moment it streams. The
// standby's copy of the slot becomes synchronized (synced, persistent,
// valid); walrelay_failover_ready says 1 and the log says when. Then the
// primary is killed (SIGKILL) at that point and the standby promoted:
// walrelay resumes from the synchronized copy, says the promoted server
// holds no copy for a next failover (walrelay_failover_ready 0), and every
// committed event is in Kafka, read back to the end offsets (lost 0).
//
// The figure is the time from walrelay's first status update (its
// walsender holds the slot) to the standby's synchronized copy.
// WALRELAY_CHAOS runs it 10 times, each on a pair of its own.
func TestFailoverReadyAtOnce(t *testing.T) {
	t.Parallel()
	runs := 1
	if os.Getenv("WALRELAY_CHAOS") != "" {
		runs = 10
	}
	var took []time.Duration
	for i := range runs {
		t.Run(fmt.Sprintf("run%d", i+1), func(t *testing.T) {
			took = append(took, readyThenKill(t))
		})
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	if len(sorted) > 0 {
		t.Logf("FIGURES runs=%d streaming_to_synchronized=%v max=%s bin=%s", len(took), took, sorted[len(sorted)-1], relayBinary())
	}
}

// relayBinary is the walrelay binary under test: WALRELAY_TEST_BIN, or
// the one built for the package.
func relayBinary() string {
	if b := os.Getenv("WALRELAY_TEST_BIN"); b != "" {
		return b
	}
	return relayBin
}

func readyThenKill(t *testing.T) time.Duration {
	pair := testbed.StartPGPair(t, "17")
	e := failoverEnv(t, pair)
	e.Bin = relayBinary()
	standbyURL := pair.StandbyURL("failover")
	w := &harness.Workload{Writers: 2, Aggregates: 20, MaxTxRows: 3, Rollback: 0.1, Pause: 5 * time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.StartEnv(t, []string{"WALRELAY_PG_STANDBY_URL=" + standbyURL})
	relay.WaitStreaming()
	streaming := time.Now()
	writing := w.Start(e.Env)
	defer writing.Stop()
	var took time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if ready, _ := standbySlot(t, e, standbyURL); ready {
			took = time.Since(streaming)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby has no synchronized copy of the slot 2 minutes after walrelay started streaming; log:\n%s", relay.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, syncedAt := standbySlot(t, e, standbyURL)
	t.Logf("FIGURES streaming_to_synchronized=%s standby_slot=%s", took.Round(time.Millisecond), syncedAt)

	// What the relay says: the metric, then the log line.
	// N.B. not fatal: the failover goes on, so that a binary without the
	// metric (WALRELAY_TEST_BIN) is measured all the same.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if v, ok := relay.MetricOK("walrelay_failover_ready"); ok && v == 1 {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Errorf("walrelay_failover_ready is not 1 30 s after the standby's copy became synchronized")
			break
		}
	}
	if !strings.Contains(relay.Log(), `"msg":"failover ready: the standby holds a synchronized copy of the slot"`) {
		t.Errorf("walrelay did not log that the standby's copy is ready; log:\n%s", relay.Log())
	}

	// kill -9 of the primary at that point.
	c.WaitFor(50, 2*time.Minute)
	pair.KillPrimary(t)
	pair.Promote(t)
	relay.WaitStreaming()
	if relay.Exited() {
		t.Fatalf("walrelay exited after the failover: %v", relay.Err())
	}
	// The standby is the primary now: no copy serves a next failover, and
	// walrelay says so.
	harness.WaitFor(t, time.Minute, "walrelay_failover_ready to be 0 after the promotion", func() bool {
		v, ok := relay.MetricOK("walrelay_failover_ready")
		return ok && v == 0
	})
	if !strings.Contains(relay.Log(), `"msg":"not failover ready: the standby's copy of the slot would not serve after a promotion`) ||
		!strings.Contains(relay.Log(), "pg_is_in_recovery() is false") {
		t.Errorf("walrelay did not log that the copy stopped being ready, and why; log:\n%s", relay.Log())
	}
	writeOnThenSettle(t, e, w, writing, w.Committed()+100, nil)
	rows := e.CommittedRows(t)
	v := e2etest.CheckRecords(t, e, c.ToEnd(), rows, w.RolledBack(), 3, true)
	t.Logf("FIGURES events=%d duplicates=%d", len(rows), v.Duplicates)
	if n := strings.Count(relay.Log(), `"msg":"created replication slot"`); n != 1 {
		t.Errorf("walrelay created the slot %d times, want once (before the failover)", n)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
	return took
}
