package fault

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// parking is a scenario whose walrelay runs with --on-poison=park: its
// topics' small limits, the poison rows, and at the end the operator's
// redrive and the accounting of every parked event.
type parking struct {
	s        *scenario
	dlq      string
	poisoned map[string]bool // topic "\x00" key
	poisons  int             // poison rows written
}

// newParking prepares w's database and topics (max.message.bytes
// parkLimit) and walrelay's parking flags.
func newParking(t *testing.T, w *harness.Workload) *parking {
	s := newScenario(t, w)
	p := &parking{s: s, dlq: s.e.Prefix + ".dlq", poisoned: map[string]bool{}}
	for _, topic := range s.e.Topics() {
		s.e.Bed.CreateTopicWith(t, topic, 3, map[string]string{"max.message.bytes": fmt.Sprint(parkLimit)})
	}
	s.e.RelayArgs = append(s.e.RelayArgs, "--on-poison", "park", "--dlq-topic", p.dlq, "--checkpoint-topic", s.e.CheckpointTopic())
	return p
}

// poison commits a row over its topic's limit for a random aggregate,
// taking the aggregate's next seq under its row lock like the writers'
// rows. Its own connection: PostgreSQL may have restarted since the last.
func (p *parking) poison() {
	s, t := p.s, p.s.t
	t.Helper()
	k := s.rng.IntN(s.w.Aggregates)
	agg := fmt.Sprintf("agg-%d", k)
	conn := harness.Connect(t, s.e.DSN)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `WITH s AS (UPDATE agg_seq SET seq = seq + 1 WHERE id = $2 RETURNING seq)
		INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
		SELECT $1, $3, $2, 'Poison', jsonb_build_object('seq', s.seq, 'agg', $2::text, 'pad', repeat('p', $4::int)) FROM s`,
		harness.NewUUID(), agg, s.e.AggType(k), 2*parkLimit); err != nil {
		t.Fatalf("poison row %d: %v", p.poisons, err)
	}
	p.poisoned["outbox.event."+s.e.AggType(k)+"\x00"+agg] = true
	p.poisons++
}

// parkFigures are what a parking scenario counts at its end.
type parkFigures struct {
	parked, redriven, missing int
	rep                       harness.Report
}

func (f parkFigures) String() string {
	return fmt.Sprintf("parked_events=%d redriven=%d parked_missing=%d lost=%d order_violations=%d gaps=%d duplicates=%d",
		f.parked, f.redriven, f.missing, f.rep.Lost, f.rep.OrderViolations, f.rep.Gaps, f.rep.Duplicates)
}

// finish stops the writers, waits until relay confirms the last commit,
// raises the topics' limits and runs walrelay dlq redrive for each
// poisoned aggregate, as the operator would; then checks the invariants
// (scenario.finish) and that every parked event's dead letter is an event
// its topic now holds.
func (p *parking) finish(relay *harness.Relay) parkFigures {
	s, t := p.s, p.s.t
	t.Helper()
	relay.WaitStreaming()
	s.waitCommitted(int64(s.events), relay)
	if err := s.writing.Stop(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	after := s.e.Bed.CurrentWALLSN(t, s.e.DSN)
	harness.WaitFor(t, 3*time.Minute, "walrelay to confirm the last commit", func() bool {
		return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= after
	})
	// N.B. before the redrive: walrelay_parked_events counts each event
	// dead-lettered behind a parked aggregate once, however often a
	// restart relayed it again.
	deadLettered := map[string]bool{}
	for _, r := range s.e.Bed.ConsumeAll(t, []string{p.dlq}, time.Second) {
		if _, ok := harness.Header(r, "walrelay.parked.aggregate"); ok {
			id, _ := harness.Header(r, "walrelay.event.id")
			deadLettered[id] = true
		}
	}
	if got := (&e2etest.Proc{Relay: relay, T: t}).Metric("walrelay_parked_events"); int(got) != len(deadLettered) {
		t.Errorf("walrelay_parked_events %v, want %d: the distinct events the dead-letter topic holds behind parked aggregates", got, len(deadLettered))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.e.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: ptr("1048588")}}, s.e.Topics()...); err != nil {
		t.Fatalf("raise max.message.bytes: %v", err)
	}
	var f parkFigures
	for _, ak := range slices.Sorted(maps.Keys(p.poisoned)) {
		topic, key, _ := strings.Cut(ak, "\x00")
		code, out := runFor(t, 3*time.Minute, relayBin, "dlq", "redrive", "--agg-topic", topic, "--agg-key", key,
			"--brokers", strings.Join(s.e.Bed.Brokers(), ","), "--dlq-topic", p.dlq, "--checkpoint-topic", s.e.CheckpointTopic())
		if code != 0 || !strings.Contains(out, "the relay un-parked the aggregate") {
			t.Fatalf("dlq redrive %s %s: exit %d:\n%s", topic, key, code, out)
		}
		var n int
		if _, err := fmt.Sscanf(out[strings.Index(out, "re-published "):], "re-published %d events", &n); err == nil {
			f.redriven += n
		}
	}
	parked := map[string]bool{}
	for _, r := range s.e.Bed.ConsumeAll(t, []string{p.dlq}, time.Second) {
		if _, ok := harness.Header(r, "walrelay.parked.aggregate"); ok {
			id, _ := harness.Header(r, "walrelay.event.id")
			parked[id] = true
		}
	}
	f.parked = len(parked)
	f.rep = s.finish(relay, fmt.Sprintf("poisons=%d parked_events=%d redriven=%d", p.poisons, len(parked), f.redriven))
	stopRelay(t, relay)
	held := map[string]bool{}
	for _, r := range s.e.Bed.ConsumeAll(t, s.e.Topics(), time.Second) {
		id, _ := harness.Header(r, "id")
		held[id] = true
	}
	for id := range parked {
		if !held[id] {
			f.missing++
		}
	}
	if f.missing > 0 || f.parked < p.poisons {
		t.Errorf("%d of %d parked events are not in their topics after the redrive (poison rows %d)", f.missing, f.parked, p.poisons)
	}
	return f
}

// TestParkServerRestarts: TestKill9Park's parking, with Kafka stopped and
// started again, PostgreSQL restarted and walrelay killed with SIGKILL,
// in a random order while writers commit and poison rows park a few
// aggregates. Once the writers stop, the limits are raised and each
// parked aggregate redriven: 0 lost, 0 per-aggregate order violations, 0
// gaps, and every parked event is in its topic.
func TestParkServerRestarts(t *testing.T) {
	testbed.Disrupt(t)
	kills, outages, restarts, poisons := scale(1, 10), scale(1, 3), scale(1, 6), scale(4, 20)
	down := scale(5*time.Second, 20*time.Second)
	p := newParking(t, defaultWorkload(scale(10000, 200000)))
	s := p.s
	var faults []string
	for range kills {
		faults = append(faults, "kill-9")
	}
	for range outages {
		faults = append(faults, "kafka-down")
	}
	for range restarts {
		faults = append(faults, "postgres-restart")
	}
	s.rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	t.Logf("faults in order: %v", faults)
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()

	slice := s.events / (len(faults) + 1)
	for i, f := range faults {
		relay.WaitStreaming()
		s.waitCommitted(int64(i*slice+slice/2+s.rng.IntN(slice/2)), relay)
		for p.poisons < poisons && p.poisons*len(faults) <= i*poisons {
			p.poison()
		}
		in := s.faults.Begin(f)
		switch f {
		case "kill-9":
			relay.Kill()
			in.End()
			relay = s.e.StartRelay(t)
		case "kafka-down":
			s.e.Bed.StopKafka(t)
			// N.B. poison rows while Kafka is down: parked once it is back.
			if p.poisons < poisons {
				p.poison()
			}
			for until := time.Now().Add(down); time.Now().Before(until); time.Sleep(250 * time.Millisecond) {
				if relay.Exited() {
					t.Fatalf("walrelay exited while Kafka was down")
				}
			}
			s.e.Bed.StartKafka(t)
			back := s.e.Bed.CurrentWALLSN(t, s.e.DSN)
			harness.WaitFor(t, 3*time.Minute, "walrelay to confirm what was written while Kafka was down", func() bool {
				return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= back
			})
			in.End()
		case "postgres-restart":
			offset := harness.LogOffset(t, s.e)
			s.e.Bed.RestartPostgres(t)
			relay.WaitStreaming()
			resumed := harness.WaitPGResumePositions(t, s.e, offset)
			if len(resumed) == 0 {
				t.Fatalf("PostgreSQL logged no new session of slot %s after the restart", s.e.Slot)
			}
			in.Resumed(slices.Min(resumed))
			in.End()
		}
	}
	for p.poisons < poisons {
		p.poison()
	}
	fig := p.finish(relay)
	t.Logf("FIGURES kills=%d kafka_outages=%d postgres_restarts=%d poisons=%d %s", kills, outages, restarts, p.poisons, fig)
}
