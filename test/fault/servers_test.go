package fault

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestKafkaDown: the broker is stopped mid-stream and started again after a
// while; walrelay keeps running, holds the slot, and delivers everything once
// Kafka is back. While Kafka is down the slot does not pass the first outbox
// transaction committed after the broker stopped (no acknowledgement for it
// can exist): the witness gives its commit end, the slot is sampled
// throughout the outage.
func TestKafkaDown(t *testing.T) { kafkaDown(t, atLeastOnce) }

// TestKafkaDownExactlyOnce is TestKafkaDown with --exactly-once: no duplicates either.
func TestKafkaDownExactlyOnce(t *testing.T) { kafkaDown(t, exactlyOnce) }

// TestKafkaDownMessages is TestKafkaDown with every event a logical
// decoding message (--source messages).
func TestKafkaDownMessages(t *testing.T) { kafkaDown(t, messages) }

func kafkaDown(t *testing.T, m variant) {
	testbed.Disrupt(t)
	outages := scale(1, 3)
	down := scale(10*time.Second, 30*time.Second)
	s := m.in(newScenario(t, defaultWorkload(scale(25000, 150000))))
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()

	slice := s.events / (outages + 1)
	var recovery []time.Duration
	type outage struct{ stopped, maxConfirmed pglogrepl.LSN }
	var held []outage
	for i := 0; i < outages; i++ {
		s.waitCommitted(int64(i*slice+slice/2+s.rng.IntN(slice/2)), relay)
		in := s.faults.Begin("kafka-down")
		s.e.Bed.StopKafka(t)
		o := outage{stopped: s.e.Bed.CurrentWALLSN(t, s.e.DSN)}
		for until := time.Now().Add(down); time.Now().Before(until); time.Sleep(250 * time.Millisecond) {
			if relay.Exited() {
				t.Fatalf("walrelay exited while Kafka was down")
			}
			o.maxConfirmed = max(o.maxConfirmed, s.confirmed())
		}
		o.maxConfirmed = max(o.maxConfirmed, s.confirmed())
		held = append(held, o)
		s.e.Bed.StartKafka(t)
		up := time.Now()
		back := s.e.Bed.CurrentWALLSN(t, s.e.DSN)
		harness.WaitFor(t, 3*time.Minute, "walrelay to confirm what was written while Kafka was down", func() bool {
			return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= back
		})
		recovery = append(recovery, time.Since(up))
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	events, err := harness.Events(s.e.CommittedRows(t), s.wit.CommitEnds(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range held {
		// The first outbox commit after the broker stopped.
		first := pglogrepl.LSN(1<<64 - 1)
		for _, ev := range events {
			if ev.CommitEnd > o.stopped {
				first = min(first, ev.CommitEnd)
			}
		}
		switch {
		case first == 1<<64-1:
			t.Errorf("outage %d: no outbox transaction committed after Kafka stopped at %s: the test proves nothing", i+1, o.stopped)
		case o.maxConfirmed >= first:
			t.Errorf("outage %d: confirmed_flush_lsn reached %s while Kafka was down, past %s, the end of the first outbox transaction committed after it stopped (at %s)", i+1, o.maxConfirmed, first, o.stopped)
		default:
			t.Logf("outage %d: Kafka stopped at %s; slot at most %s while down, first outbox commit after the stop ends at %s", i+1, o.stopped, o.maxConfirmed, first)
		}
	}
	t.Logf("FIGURES outages=%d down=%s caught_up_after=%v events=%d duplicates=%d", outages, down, recovery, rep.Events, rep.Duplicates)
}

// TestPostgresRestart: PostgreSQL is restarted (fast shutdown, start)
// mid-stream; walrelay reconnects and resumes from the slot.
func TestPostgresRestart(t *testing.T) { postgresRestart(t, atLeastOnce) }

// TestPostgresRestartExactlyOnce is TestPostgresRestart with --exactly-once: no duplicates either.
func TestPostgresRestartExactlyOnce(t *testing.T) { postgresRestart(t, exactlyOnce) }

// TestPostgresRestartMessages is TestPostgresRestart with every event a
// logical decoding message (--source messages).
func TestPostgresRestartMessages(t *testing.T) { postgresRestart(t, messages) }

func postgresRestart(t *testing.T, m variant) {
	testbed.Disrupt(t)
	restarts := scale(2, 10)
	s := m.in(newScenario(t, defaultWorkload(scale(12000, 150000))))
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()

	slice := s.events / (restarts + 1)
	var regressed []uint64
	for i := 0; i < restarts; i++ {
		s.waitCommitted(int64(i*slice+slice/2+s.rng.IntN(slice/2)), relay)
		offset := harness.LogOffset(t, s.e)
		in := s.faults.Begin("postgres-restart")
		before := s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN
		s.e.Bed.RestartPostgres(t)
		relay.WaitStreaming()
		resumed := harness.WaitPGResumePositions(t, s.e, offset)
		if len(resumed) == 0 {
			t.Fatalf("PostgreSQL logged no new session of slot %s after the restart", s.e.Slot)
		}
		// N.B. PostgreSQL before 17 may resume the slot before the position
		// it showed as confirmed (see harness.PGResumePositions): what it sends
		// again from there is a duplicate this fault accounts for.
		from := slices.Min(resumed)
		in.Resumed(from)
		regressed = append(regressed, uint64(before-min(from, before)))
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES restarts=%d confirmed_regressed_bytes=%v events=%d duplicates=%d", restarts, regressed, rep.Events, rep.Duplicates)
}
