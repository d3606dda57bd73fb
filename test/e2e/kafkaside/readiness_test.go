package kafkaside

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestReadinessFollowsKafka: /readyz says ready while Kafka answers the
// relay's pings; cut off from Kafka (a proxy isolating the broker), it
// says not ready and why, once Kafka has not answered for the grace of
// three polls (15 s at the least), while /healthz stays 200: the process
// runs; healed, it is ready again. (A single slow answer must not flip it:
// before the grace, a ping whose time the publication check had used up
// made /readyz answer 503 "kafka does not answer" under load.)
func TestReadinessFollowsKafka(t *testing.T) {
	t.Parallel()
	e, proxy, relay := readyBehindProxy(t)
	status := func(path string) func() bool {
		return func() bool { code, _ := relay.Get(path); return code == 200 }
	}
	heal := proxy.Isolate()
	var body string
	harness.WaitFor(t, 2*time.Minute, "/readyz to say Kafka has not answered", func() bool {
		var code int
		code, body = relay.Get("/readyz")
		return code == 503 && strings.Contains(body, "kafka has not answered for")
	})
	if code, b := relay.Get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d %q while Kafka is cut off, want 200: the process runs", code, b)
	}
	heal()
	harness.WaitFor(t, 2*time.Minute, "/readyz to answer 200 again", status("/readyz"))
	relaysARow(t, e, "after the cut")
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// readyBehindProxy starts a relay whose Kafka is behind a proxy, with
// --status-interval 1s (a ping every second), and waits until /readyz
// answers 200.
func readyBehindProxy(t *testing.T) (*env, *harness.Proxy, *e2etest.Proc) {
	t.Helper()
	e := newEnv(t)
	proxy := harness.NewKafkaProxy(t, e.Bed.Brokers()[0])
	relay := e.Start(t, "--brokers", proxy.Addr(), "--status-interval", "1s")
	relay.WaitStreaming()
	harness.WaitFor(t, time.Minute, "/readyz to answer 200", func() bool {
		code, _ := relay.Get("/readyz")
		return code == 200
	})
	return e, proxy, relay
}

// relaysARow writes an outbox row and waits for the slot to be confirmed
// past it.
func relaysARow(t *testing.T, e *env, when string) {
	t.Helper()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, 2*time.Minute, "the slot to move past the row written "+when, func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
}

// TestReadinessToleratesSlowKafkaAnswers: a broker that answers the
// relay's pings (metadata requests) later than the poll interval still
// answers. With --status-interval 1s (a ping every second) and every
// metadata request held 2.5 s, /readyz stays 200 past the 15 s grace (ten
// such answers, 25 s at the least), and rows written meanwhile are relayed
// and confirmed. (A ping gave up after one poll interval: in make
// fleet-group a replica streaming its pipelines on a loaded machine said
// "kafka has not answered for 38s".)
func TestReadinessToleratesSlowKafkaAnswers(t *testing.T) {
	t.Parallel()
	e, proxy, relay := readyBehindProxy(t)
	_, _, seen := proxy.Stats()
	from := seen["metadata"]
	stop := proxy.DelayAll(harness.KafkaMetadata, 2500*time.Millisecond)
	harness.WaitFor(t, 3*time.Minute, "ten metadata requests answered 2.5 s late", func() bool {
		if code, body := relay.Get("/readyz"); code != 200 {
			t.Fatalf("/readyz = %d %q while Kafka answers its metadata requests 2.5 s late, want 200", code, body)
		}
		_, _, seen := proxy.Stats()
		return seen["metadata"]-from >= 10
	})
	relaysARow(t, e, "while metadata was slow")
	stop()
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
