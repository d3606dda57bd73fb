package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestSilentPostgresConnection: the connection to PostgreSQL stays open
// but nothing comes through it any more (a half-dead peer, a stuck
// middlebox). walrelay asks for a reply, warns after four quiet status
// intervals, declares the connection dead once wal_sender_timeout has
// passed too (the server's walsender still holds the slot until then),
// and streams again on a new one. walrelay's connections set
// wal_sender_timeout to 10s (options in its --pg-url; the bed's is 60s):
// walrelay must take the timeout its own connection has.
func TestSilentPostgresConnection(t *testing.T) {
	t.Parallel()
	s := newScenario(t, defaultWorkload(scale(3000, 30000)))
	proxy := harness.NewPGProxy(t, harness.PGHostPort(t, s.e.DSN))
	dsn := harness.DSNVia(t, s.e.DSN, proxy.Addr(), map[string]string{"options": "-cwal_sender_timeout=10s"})
	relay := s.e.StartRelay(t, "--pg-url", dsn, "--status-interval", "1s")
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
	harness.WaitFor(t, time.Minute, "walrelay to take the connection for dead", func() bool {
		return strings.Contains(relay.Log(), "the connection is dead")
	})
	dead := time.Since(silenced)
	if !strings.Contains(relay.Log(), `"wal_sender_timeout":"10s"`) {
		t.Errorf("walrelay's warning does not give its connection's wal_sender_timeout (10s); log:\n%s", relay.Log())
	}
	proxy.SetLatency(0)
	harness.WaitFor(t, 2*time.Minute, "walrelay to stream again on a new connection", func() bool {
		now := s.e.Walsender(t)
		return now != 0 && now != old
	})
	in.End()
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES silent_detected_after=%s dead_after=%s events=%d duplicates=%d", detected.Round(100*time.Millisecond), dead.Round(100*time.Millisecond), rep.Events, rep.Duplicates)
}
