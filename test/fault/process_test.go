package fault

import (
	"strings"
	"testing"
	"time"
)

// TestKill9: walrelay is killed with SIGKILL at random moments while writers
// commit, and started again each time: nothing is lost, nothing phantom,
// each key in commit order, duplicates only of unconfirmed events.
func TestKill9(t *testing.T) { kill9(t, atLeastOnce) }

// TestKill9ExactlyOnce is TestKill9 with --exactly-once: no duplicates either.
func TestKill9ExactlyOnce(t *testing.T) { kill9(t, exactlyOnce) }

// TestKill9Messages is TestKill9 with half the events emitted as logical
// decoding messages, mixed with outbox rows in the same transactions
// (--source tables,messages): commit order holds across both.
func TestKill9Messages(t *testing.T) { kill9(t, mixed) }

func kill9(t *testing.T, m variant) {
	t.Parallel()
	kills := scale(10, 120)
	s := m.in(newScenario(t, defaultWorkload(scale(15000, 500000))))
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()

	streaming := 0
	slice := s.events / kills
	for i := 0; i < kills; i++ {
		// The kill strikes at a random moment of its slice of the events
		// while walrelay streams; every fourth within half a second of the
		// start instead, while walrelay prepares.
		if i%4 == 3 {
			time.Sleep(s.between(0, 500*time.Millisecond))
		} else {
			relay.WaitStreaming()
			s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		}
		in := s.faults.Begin("kill-9")
		if s.e.Walsender(t) != 0 {
			streaming++
		}
		relay.Kill()
		in.End()
		relay = s.e.StartRelay(t)
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	if streaming < kills/2 {
		t.Errorf("only %d of %d kills struck while walrelay streamed", streaming, kills)
	}
	t.Logf("FIGURES kills=%d while_streaming=%d events=%d duplicates=%d max_copies=%d", kills, streaming, rep.Events, rep.Duplicates, rep.MaxCopies)
}

// TestSIGTERMUnderLoad: walrelay is stopped gracefully while writers commit
// and started again: every event arrives exactly once.
func TestSIGTERMUnderLoad(t *testing.T) { sigtermUnderLoad(t, atLeastOnce) }

// TestSIGTERMUnderLoadExactlyOnce is TestSIGTERMUnderLoad with --exactly-once: no duplicates either.
func TestSIGTERMUnderLoadExactlyOnce(t *testing.T) { sigtermUnderLoad(t, exactlyOnce) }

func sigtermUnderLoad(t *testing.T, m mode) {
	t.Parallel()
	stops := scale(5, 30)
	s := m.in(newScenario(t, defaultWorkload(scale(8000, 100000))))
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()

	slice := s.events / stops
	for i := 0; i < stops; i++ {
		relay.WaitStreaming()
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		stopRelay(t, relay)
		if !strings.Contains(relay.Log(), `"stopped"`) {
			t.Errorf("walrelay's log has no final \"stopped\" line")
		}
		relay = s.e.StartRelay(t)
	}
	// N.B. no fault recorded: the checker counts every duplicate as
	// unexplained.
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	if rep.Duplicates != 0 {
		t.Errorf("%d duplicates after graceful stops, want 0", rep.Duplicates)
	}
	t.Logf("FIGURES graceful_stops=%d events=%d duplicates=%d", stops, rep.Events, rep.Duplicates)
}
