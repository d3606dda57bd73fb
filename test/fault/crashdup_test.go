package fault

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestKill9DuplicatesAtDefaults: walrelay at its default status interval
// (10s, not the tests' 1s) is killed with SIGKILL every crashEvery events
// of a steady stream of single-row transactions (about a thousand a
// second, crashEvery about 12 s of it), and started again each time:
// nothing is lost, nothing phantom, commit order per key. It logs what
// each crash sent again, in events and in seconds of traffic at the rate
// the writers kept (docs/performance.md, "Confirmation"): everything
// acknowledged and not yet confirmed when the kill struck, and what was in
// flight. N.B. a figure, not a threshold: the test fails only on the
// delivery invariants.
func TestKill9DuplicatesAtDefaults(t *testing.T) {
	t.Parallel()
	const kills, crashEvery = 4, 12000
	events := (kills + 1) * crashEvery
	s := newScenario(t, &harness.Workload{Writers: 2, Events: events, Aggregates: 200, MaxTxRows: 1, Pause: 2 * time.Millisecond})
	relay := s.e.StartRelay(t, "--status-interval", "10s")
	relay.WaitStreaming()
	start := time.Now()
	s.write()
	streaming := 0
	for i := 1; i <= kills; i++ {
		relay.WaitStreaming()
		s.waitCommitted(int64(i*crashEvery), relay)
		in := s.faults.Begin("kill-9")
		if s.e.Walsender(t) != 0 {
			streaming++
		}
		relay.Kill()
		in.End()
		relay = s.e.StartRelay(t, "--status-interval", "10s")
	}
	s.waitCommitted(int64(events), relay)
	rate := float64(s.w.Committed()) / time.Since(start).Seconds()
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	if streaming != kills {
		t.Errorf("%d of %d kills struck while walrelay streamed, want all", streaming, kills)
	}
	perCrash := float64(rep.Duplicates) / kills
	t.Logf("FIGURES kills=%d events=%d rate=%.0f/s duplicates=%d per_crash=%.0f events = %.2f s of traffic max_copies=%d",
		kills, rep.Events, rate, rep.Duplicates, perCrash, perCrash/rate, rep.MaxCopies)
}
