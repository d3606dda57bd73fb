package fault

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// cutMode is one way the proxy cuts a connection.
type cutMode struct {
	kind  string
	match harness.Matcher // nil: reset every connection at once
}

// cut injects one cut through proxy and returns when it struck.
func cut(t *testing.T, proxy *harness.Proxy, m cutMode) {
	t.Helper()
	if m.match == nil {
		if proxy.CutAll() == 0 {
			t.Fatalf("%s: the proxy had no connection to cut", m.kind)
		}
		return
	}
	select {
	case <-proxy.CutAfter(m.match):
	case <-time.After(30 * time.Second):
		proxy.Disarm()
		t.Fatalf("%s: no such message passed the proxy within 30s", m.kind)
	}
}

// TestPostgresConnectionCuts: walrelay reaches PostgreSQL through a proxy
// that cuts its connections: at random moments, right after the server sent
// a transaction's Commit (walrelay has the whole transaction, nothing of it
// is confirmed), and right after walrelay sent a status update (the
// confirmation reaches the server, the stream ends).
func TestPostgresConnectionCuts(t *testing.T) {
	// N.B. walrelay's restart backoff doubles (up to 30 s) while attempts
	// last under a minute, so the short version cuts each way once or twice.
	cuts := scale(4, 15)
	modes := []cutMode{
		{"cut", nil},
		{"cut-after-commit", harness.PGCommit},
		{"cut-after-status-update", harness.PGStatusUpdate},
	}
	s := newScenario(t, defaultWorkload(scale(15000, 150000)))
	proxy := harness.NewPGProxy(t, harness.PGHostPort(t, s.e.DSN))
	relay := s.e.StartRelay(t, "--pg-url", harness.DSNVia(t, s.e.DSN, proxy.Addr(), nil))
	relay.WaitStreaming()
	s.write()

	slice := s.events / cuts
	var recovered []time.Duration
	for i := 0; i < cuts; i++ {
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		old := s.e.Walsender(t)
		if old == 0 {
			t.Fatalf("walrelay does not stream before cut %d", i+1)
		}
		m := modes[i%len(modes)]
		in := s.faults.Begin(m.kind)
		cut(t, proxy, m)
		struck := time.Now()
		harness.WaitFor(t, 2*time.Minute, "walrelay to stream again after "+m.kind, func() bool {
			now := s.e.Walsender(t)
			return now != 0 && now != old
		})
		recovered = append(recovered, time.Since(struck).Round(100*time.Millisecond))
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	conns, made, seen := proxy.Stats()
	t.Logf("FIGURES cuts=%d streaming_again_after=%v proxy_conns=%d proxy_cuts=%d commits_forwarded=%d status_updates_forwarded=%d events=%d duplicates=%d",
		cuts, recovered, conns, made, seen["commit"], seen["status_update"], rep.Events, rep.Duplicates)
}

// TestKafkaConnectionCuts: walrelay reaches Kafka through a proxy that
// advertises itself as the broker and cuts connections: at random moments
// and right after forwarding a produce request (the broker appends the
// records, the acknowledgement never arrives). The idempotent producer
// retries without writing anything twice.
func TestKafkaConnectionCuts(t *testing.T) {
	cuts := scale(6, 40)
	modes := []cutMode{
		{"cut", nil},
		{"cut-after-produce", harness.KafkaProduce},
	}
	s := newScenario(t, defaultWorkload(scale(15000, 200000)))
	broker := s.e.Bed.Brokers()[0]
	proxy := harness.NewKafkaProxy(t, broker)
	relay := s.e.StartRelay(t, "--brokers", proxy.Addr())
	relay.WaitStreaming()
	s.write()

	slice := s.events / cuts
	for i := 0; i < cuts; i++ {
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		if i == 0 {
			// N.B. every connection goes through the proxy: the metadata
			// walrelay got names the proxy as the broker.
			peers, err := harness.TCPPeers(relay.Pid())
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(peers, broker) {
				t.Fatalf("walrelay connects to the broker %s directly (peers %v): the proxy is bypassed", broker, peers)
			}
		}
		m := modes[i%len(modes)]
		in := s.faults.Begin(m.kind)
		cut(t, proxy, m)
		at := s.e.Bed.CurrentWALLSN(t, s.e.DSN)
		harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("walrelay to confirm past %s after %s", at, m.kind), func() bool {
			return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= at
		})
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	conns, made, seen := proxy.Stats()
	if seen["produce"] == 0 {
		t.Errorf("no produce request passed the proxy")
	}
	if rep.Duplicates != 0 {
		t.Errorf("%d duplicates: the idempotent producer should have retried the cut requests without writing twice", rep.Duplicates)
	}
	t.Logf("FIGURES cuts=%d proxy_conns=%d proxy_cuts=%d produce_requests=%d events=%d duplicates=%d",
		cuts, conns, made, seen["produce"], rep.Events, rep.Duplicates)
}
