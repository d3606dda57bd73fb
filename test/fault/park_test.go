package fault

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
)

// parkLimit is the topics' max.message.bytes while the scenario writes: a
// poison row's record is larger.
const parkLimit = 20000

// TestKill9Park: walrelay runs with --on-poison=park while writers commit
// and rows over their topic's max.message.bytes land in the middle of a
// few aggregates' histories; it is killed with SIGKILL at random moments
// and started again each time. Once the writers stop, the limits are
// raised and walrelay dlq redrive re-publishes each parked aggregate. A
// real consumer then holds every committed event (the poison ones too):
// 0 lost, 0 per-aggregate order violations, 0 gaps, and every parked
// event's dead letter is one of them.
func TestKill9Park(t *testing.T) {
	kills, poisons := scale(6, 60), scale(4, 20)
	s := newScenario(t, defaultWorkload(scale(6000, 200000)))
	dlq := s.e.Prefix + ".dlq"
	for _, topic := range s.e.Topics() {
		s.e.Bed.CreateTopicWith(t, topic, 3, map[string]string{"max.message.bytes": fmt.Sprint(parkLimit)})
	}
	s.e.RelayArgs = append(s.e.RelayArgs, "--on-poison", "park", "--dlq-topic", dlq, "--checkpoint-topic", s.e.CheckpointTopic())
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()

	// Poison rows for a few aggregates, spread over the run, each taking
	// the aggregate's next seq under its row lock like the writers' rows.
	poisoned := map[string]bool{}
	conn := harness.Connect(t, s.e.DSN)
	defer conn.Close(context.Background())
	poison := func(i int) {
		k := s.rng.IntN(s.w.Aggregates)
		agg := fmt.Sprintf("agg-%d", k)
		if _, err := conn.Exec(context.Background(), `WITH s AS (UPDATE agg_seq SET seq = seq + 1 WHERE id = $2 RETURNING seq)
			INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
			SELECT $1, $3, $2, 'Poison', jsonb_build_object('seq', s.seq, 'agg', $2::text, 'pad', repeat('p', $4::int)) FROM s`,
			harness.NewUUID(), agg, s.e.AggType(k), 2*parkLimit); err != nil {
			t.Fatalf("poison row %d: %v", i, err)
		}
		poisoned["outbox.event."+s.e.AggType(k)+"\x00"+agg] = true
	}
	slice := s.events / kills
	next := 0
	for i := 0; i < kills; i++ {
		relay.WaitStreaming()
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		for ; next < poisons && next*kills <= i*poisons; next++ {
			poison(next)
		}
		in := s.faults.Begin("kill-9")
		relay.Kill()
		in.End()
		relay = s.e.StartRelay(t)
	}
	for ; next < poisons; next++ {
		poison(next)
	}
	relay.WaitStreaming()
	s.waitCommitted(int64(s.events), relay)
	if err := s.writing.Stop(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	after := s.e.Bed.CurrentWALLSN(t, s.e.DSN)
	harness.WaitFor(t, 3*time.Minute, "walrelay to confirm the last commit", func() bool {
		return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= after
	})

	// The operator raises the limits and redrives each parked aggregate.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.e.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: ptr("1048588")}}, s.e.Topics()...); err != nil {
		t.Fatalf("raise max.message.bytes: %v", err)
	}
	redriven := 0
	for ak := range poisoned {
		topic, key, _ := strings.Cut(ak, "\x00")
		code, out := runFor(t, 3*time.Minute, relayBin, "dlq", "redrive", "--agg-topic", topic, "--agg-key", key,
			"--brokers", strings.Join(s.e.Bed.Brokers(), ","), "--dlq-topic", dlq, "--checkpoint-topic", s.e.CheckpointTopic())
		if code != 0 || !strings.Contains(out, "the relay un-parked the aggregate") {
			t.Fatalf("dlq redrive %s %s: exit %d:\n%s", topic, key, code, out)
		}
		var n int
		if _, err := fmt.Sscanf(out[strings.Index(out, "re-published "):], "re-published %d events", &n); err == nil {
			redriven += n
		}
	}
	// Every parked dead letter is an event the consumer now holds.
	parked := map[string]bool{}
	for _, r := range s.e.Bed.ConsumeAll(t, []string{dlq}, time.Second) {
		if _, ok := harness.Header(r, "walrelay.parked.aggregate"); ok {
			id, _ := harness.Header(r, "walrelay.event.id")
			parked[id] = true
		}
	}
	rep := s.finish(relay, fmt.Sprintf("poisons=%d parked_events=%d redriven=%d", poisons, len(parked), redriven))
	stopRelay(t, relay)
	held := map[string]bool{}
	for _, r := range s.e.Bed.ConsumeAll(t, s.e.Topics(), time.Second) {
		id, _ := harness.Header(r, "id")
		held[id] = true
	}
	missing := 0
	for id := range parked {
		if !held[id] {
			missing++
		}
	}
	if missing > 0 || len(parked) < poisons {
		t.Errorf("%d of %d parked events are not in their topics after the redrive (poison rows %d)", missing, len(parked), poisons)
	}
	t.Logf("FIGURES kills=%d poisons=%d parked_events=%d redriven=%d lost=%d order_violations=%d gaps=%d duplicates=%d",
		kills, poisons, len(parked), redriven, rep.Lost, rep.OrderViolations, rep.Gaps, rep.Duplicates)
}

func ptr[T any](v T) *T { return &v }

// runFor runs bin with args to its end (at most timeout) and returns its
// exit code and output.
func runFor(t *testing.T, timeout time.Duration, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, string(out) + "\n(killed: still running after " + timeout.String() + ")"
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	case err != nil:
		t.Fatalf("run %s: %v", bin, err)
	}
	return 0, string(out)
}
