package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestParkRejectedByBroker: the topic's max.message.bytes is lowered while
// walrelay runs, so Kafka itself rejects K's large record (walrelay's
// admission read the old limit): walrelay restarts from the confirmed
// position (reading the limits again), K's record parks K, and K's later
// events go to the dead-letter topic behind it while the other aggregates
// flow, none of them overtaking an earlier one; a redrive once the limit
// is raised again leaves K whole and in order.
func TestParkRejectedByBroker(t *testing.T) {
	t.Parallel()
	b := newParkBed(t, 5)
	ctx := context.Background()
	adm := kadm.NewClient(e2etest.MustClient(t, b.e))
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: e2etest.Ptr("1048588")}}, b.topic); err != nil {
		t.Fatal(err)
	}
	c := b.e.Collect(t)
	dc := b.e.DLQCollector(t, b.dlq)
	relay := b.e.Start(t, b.relayArgs()...)
	relay.WaitStreaming()
	b.write(t, 3, 0)
	b.waitConfirmed(t)

	// Lower the limit; the broker is shown to enforce it on a probe.
	probe := b.e.Prefix + ".probe"
	e2etest.CreateTopicWithLimit(t, b.e, probe, 1048588)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: e2etest.Ptr(fmt.Sprint(parkLimit))}}, b.topic, probe); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.e.Bed.Brokers()...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	harness.WaitFor(t, 30*time.Second, "the broker to refuse an 8 KB record on the probe topic", func() bool {
		return errors.Is(cl.ProduceSync(ctx, &kgo.Record{Topic: probe, Value: make([]byte, 2*parkLimit)}).FirstErr(), kerr.MessageTooLarge)
	})
	b.write(t, 4, 1) // K's seq 4 is large
	b.waitConfirmed(t)
	h := histories(t, c.ToEnd(), b.topic)
	for o := 0; o < b.others; o++ {
		k := fmt.Sprintf("agg-%02d", o)
		checkHistory(t, k, h[k], 7)
	}
	checkHistory(t, parkK, h[parkK], 3)
	if log := relay.Log(); !strings.Contains(log, "kafka rejected a record batch") || !strings.Contains(log, "its aggregate parked behind it") {
		t.Errorf("walrelay's log does not say that Kafka rejected a batch and K was parked:\n%s", log)
	}
	if got := dedupe(parkedSeqs(t, dc.ToEnd())); fmt.Sprint(got) != fmt.Sprint([]int{4, 5, 6, 7}) {
		t.Fatalf("K's parked dead letters carry seq %v, want 4 to 7", got)
	}

	b.raiseLimit(t)
	if code, out := b.runDLQ(t, "redrive", "--agg-topic", b.topic, "--agg-key", parkK); code != 0 {
		t.Fatalf("dlq redrive: exit %d:\n%s", code, out)
	}
	b.write(t, 1, 0)
	b.waitConfirmed(t)
	h = histories(t, c.ToEnd(), b.topic)
	checkHistory(t, parkK, h[parkK], 8)
	for o := 0; o < b.others; o++ {
		k := fmt.Sprintf("agg-%02d", o)
		checkHistory(t, k, h[k], 8)
	}
}
