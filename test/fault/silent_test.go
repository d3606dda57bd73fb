package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestSilentPostgresConnection: the connection to PostgreSQL stays open
// but nothing comes through it any more (a half-dead peer, a stuck
// middlebox). walrelay asks for a reply, declares the connection dead
// after four quiet status intervals, and streams again on a new one.
func TestSilentPostgresConnection(t *testing.T) {
	s := newScenario(t, defaultWorkload(scale(3000, 30000)))
	proxy := harness.NewPGProxy(t, harness.PGHostPort(t, s.e.DSN))
	relay := s.e.StartRelay(t, "--pg-url", harness.DSNVia(t, s.e.DSN, proxy.Addr(), nil), "--status-interval", "1s")
	relay.WaitStreaming()
	s.write()
	s.waitCommitted(int64(s.events/3), relay)
	old := s.e.Walsender(t)

	in := s.faults.Begin("silent connection")
	proxy.SetLatency(time.Hour) // nothing from the server arrives; nothing is closed
	silenced := time.Now()
	harness.WaitFor(t, time.Minute, "walrelay to declare the silent connection dead", func() bool {
		return strings.Contains(relay.Log(), "no message from PostgreSQL for")
	})
	detected := time.Since(silenced)
	proxy.SetLatency(0)
	harness.WaitFor(t, 2*time.Minute, "walrelay to stream again on a new connection", func() bool {
		now := s.e.Walsender(t)
		return now != 0 && now != old
	})
	in.End()
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES silent_detected_after=%s events=%d duplicates=%d", detected.Round(100*time.Millisecond), rep.Events, rep.Duplicates)
}
