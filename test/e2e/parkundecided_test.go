package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestParkReadWaitsForAnotherTransaction: walrelay reads the parked
// aggregates from the state topic when it starts, up to the topic's last
// stable offsets, and with --exactly-once writes its park records inside
// its Kafka transactions. A transaction another producer has open on the
// topic (here the test's own; another pipeline's is open from its
// checkpoint record until its commit's markers are written) holds those
// offsets below every park record committed after it began. A walrelay
// restarted then must wait until that transaction is decided and keep K
// parked: K's next event goes to the dead-letter topic behind the parked
// one, never to K's topic ahead of it. With --exactly-once the parked
// aggregates are read after the fencing: a transaction of walrelay's own
// left open by a kill is decided by then, not waited for.
func TestParkReadWaitsForAnotherTransaction(t *testing.T) {
	t.Parallel()
	b := newParkBed(t, 1)
	b.e.ExactlyOnce()
	b.state, b.eos = b.e.CheckpointTopic(), true
	relay := b.e.Start(t, b.relayArgs()...)
	relay.WaitStreaming()
	// N.B. the first walrelay has read its state before the other
	// transaction opens: it relayed an event.
	b.write(t, 1, 0)
	b.waitConfirmed(t)
	abort := e2etest.OpenTransaction(t, b.e, b.e.Prefix+".other", b.state)
	b.write(t, 1, 1)
	b.waitConfirmed(t)
	if n := relay.Metric("walrelay_parked_aggregates"); n != 1 {
		t.Fatalf("walrelay_parked_aggregates %v after K's event over the limit, want 1: the test proves nothing", n)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	// walrelay's own transaction left open, as by a kill inside one: only
	// the next walrelay's fencing decides it.
	e2etest.OpenTransaction(t, b.e, "walrelay-"+b.e.Slot, b.state)

	relay = b.e.Start(t, b.relayArgs()...)
	const waiting = "waiting for kafka transactions on checkpoint topic"
	harness.WaitFor(t, time.Minute, "walrelay to say it waits for the open transaction", func() bool {
		return strings.Contains(relay.Log(), waiting)
	})
	b.write(t, 1, 0)
	abort()
	b.waitConfirmed(t)
	recs, _ := b.e.Bed.ConsumeAllSettled(t, []string{b.topic, b.dlq}, 0)
	h := histories(t, recs, b.topic)
	if fmt.Sprint(h[parkK]) != fmt.Sprint([]int{1}) {
		t.Errorf("K's topic holds seq %v, want only 1: K was parked from seq 2 on", h[parkK])
	}
	checkHistory(t, "agg-00", h["agg-00"], 3)
	if got := parkedSeqs(t, recs); fmt.Sprint(got) != fmt.Sprint([]int{2, 3}) {
		t.Errorf("K's parked dead letters carry seq %v, want 2 and 3 in order", got)
	}
	if n := relay.Metric("walrelay_parked_aggregates"); n != 1 {
		t.Errorf("walrelay_parked_aggregates %v after the restart, want 1", n)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
