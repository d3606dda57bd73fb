package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestRecoverPastTheWindowSaysSo: walrelay relays 20 events, stops, and
// its slot is dropped (lost); 20 more are committed. `walrelay recover`
// with a --recovery-window shorter than the time since the marker's last
// confirmed commit recovers the rows all the same, and its account says
// that rows a retention sized to the window removed cannot be recovered;
// every row is then read back from Kafka (lost 0).
func TestRecoverPastTheWindowSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, e2etest.CreatedAtDDL)
	insert := func(n int) {
		for range n {
			e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'agg-1', 'T', '{}')`, harness.NewUUID(), e.AggType(0))
		}
	}
	c := e.Collect(t)
	relay := e.Start(t, "--recover-column", "created_at")
	relay.WaitStreaming()
	insert(20)
	c.WaitFor(20, time.Minute)
	var marker struct {
		CommitTime time.Time `json:"confirmed_commit_time"`
	}
	if err := json.Unmarshal([]byte(e2etest.WaitMarkerCommitTime(t, e, time.Minute)), &marker); err != nil {
		t.Fatal(err)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exit code %d, want 0", code)
	}
	e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, e.Slot)
	insert(20)
	// N.B. the window is passed by the clock, not by a sleep: recover
	// runs once the marker's commit time is more than the window old.
	const window = 2 * time.Second
	harness.WaitFor(t, time.Minute, "the marker's commit time to be older than the window", func() bool {
		return time.Since(marker.CommitTime) > window
	})
	code, out := e2etest.RunFor(t, 3*time.Minute, nil, e.Args("recover", "--recover-column", "created_at", "--recovery-window", window.String())...)
	if code != 0 {
		t.Fatalf("walrelay recover: exit %d:\n%s", code, out)
	}
	for _, want := range []string{"NOT RECOVERED: rows the outbox's retention removed", "longer than --recovery-window 2s", "rows read 40"} {
		if !strings.Contains(out, want) {
			t.Errorf("the recovery's account does not say %q:\n%s", want, out)
		}
	}
	t.Logf("walrelay recover:\n%s", out)
	relay = e.Start(t, "--recover-column", "created_at")
	relay.WaitStreaming()
	insert(5)
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "the new slot to be confirmed past the last commit", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
	e2etest.CheckRecovered(t, c.ToEnd(), e.CommittedRows(t), nil, "recover")
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
