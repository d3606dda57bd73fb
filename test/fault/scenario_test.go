package fault

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// chaos selects the long version of every scenario (make chaos).
var chaos = os.Getenv("WALRELAY_CHAOS") == "1"

// scale returns short for CI, long under WALRELAY_CHAOS=1.
func scale[T any](short, long T) T {
	if chaos {
		return long
	}
	return short
}

// scenario is one test's database, witness, workload and fault record.
type scenario struct {
	t       *testing.T
	e       *harness.Env
	w       *harness.Workload
	events  int // the writers commit at least this many events
	wit     *harness.Witness
	faults  *harness.Faults
	writing *harness.Writing
	rng     *rand.Rand
	// eos: walrelay runs with --exactly-once; finish reads back with a
	// read_committed consumer and wants no duplicate.
	eos bool
}

// mode is the delivery mode a scenario runs walrelay in.
type mode bool

const (
	atLeastOnce mode = false
	exactlyOnce mode = true
)

// in sets s to run walrelay in m; call it before the first StartRelay.
func (m mode) in(s *scenario) *scenario {
	if m == exactlyOnce {
		s.eos = true
		s.e.ExactlyOnce()
	}
	return s
}

// variant is how a scenario runs: its delivery mode (mode) or its event
// source (source).
type variant interface{ in(s *scenario) *scenario }

// source is the share of a scenario's events emitted as logical decoding
// messages rather than written as outbox rows.
type source float64

const (
	// messages: every event is a message, walrelay runs --source messages
	// (its publication lists no table).
	messages source = 1
	// mixed: half the events are messages, mixed with outbox rows in the
	// same transactions; walrelay runs --source tables,messages.
	mixed source = 0.5
)

// in makes s's workload emit messages and walrelay relay them; call it
// before the first StartRelay. N.B. a quarter of the events outside
// WALRELAY_CHAOS: make test runs the table source's scenarios in full.
func (src source) in(s *scenario) *scenario {
	s.w.Messages = float64(src)
	s.w.PrepareMessages(s.t, s.e)
	from := "tables,messages"
	if src == messages {
		from = "messages"
	}
	s.e.RelayArgs = append(s.e.RelayArgs, "--source", from)
	if !chaos {
		s.events /= 4
	}
	return s
}

// newScenario prepares w's database. The writers run until finish, and
// commit at least w.Events: a fault injected near the end still finds them
// writing.
func newScenario(t *testing.T, w *harness.Workload) *scenario {
	t.Helper()
	return newScenarioOn(t, testbed.Get(t), w)
}

// newScenarioOn is newScenario on the servers of b.
func newScenarioOn(t *testing.T, b *testbed.Bed, w *harness.Workload) *scenario {
	t.Helper()
	events := w.Events
	w.Events = 0
	e := harness.NewEnvOn(t, b, relayBin)
	// N.B. the witness slot exists before the first outbox row is written.
	wit := harness.NewWitness(t, e)
	wit.DrainEvery(t, 5*time.Second)
	w.Prepare(t, e)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return &scenario{t: t, e: e, w: w, events: events, wit: wit, faults: harness.NewFaults(t, e), rng: rand.New(rand.NewPCG(seed, seed>>1))}
}

// write starts the writers.
func (s *scenario) write() { s.writing = s.w.Start(s.e) }

// between returns a random duration in [lo, hi).
func (s *scenario) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

// waitCommitted waits until the writers have committed n events, failing if
// they stop or relay exits first.
func (s *scenario) waitCommitted(n int64, relay *harness.Relay) {
	s.t.Helper()
	for s.w.Committed() < n {
		select {
		case <-s.writing.Done():
			s.t.Fatalf("writers stopped at %d events (want %d): %v", s.w.Committed(), n, s.writing.Wait())
		default:
		}
		if relay != nil && relay.Exited() {
			s.t.Fatalf("walrelay exited unexpectedly")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// finish lets the writers commit their events and stops them, waits until relay
// has confirmed the last commit, reads every record back with a real
// consumer and checks the invariants. extra is added to the RESULT line.
func (s *scenario) finish(relay *harness.Relay, extra string) harness.Report {
	t := s.t
	t.Helper()
	s.waitCommitted(int64(s.events), relay)
	if err := s.writing.Stop(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	ends := s.wit.CommitEnds(t)
	rows := s.e.CommittedRows(t)
	events, err := harness.Events(rows, ends)
	if err != nil {
		t.Fatal(err)
	}
	var last pglogrepl.LSN
	for _, ev := range events {
		last = max(last, ev.CommitEnd)
	}
	harness.WaitFor(t, 3*time.Minute, fmt.Sprintf("walrelay to confirm the last commit (%s)", last), func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited before confirming the last commit")
		}
		return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= last
	})
	var recs []*kgo.Record
	var txr harness.TxReport
	if s.eos {
		all, _ := s.e.Bed.ConsumeAllSettled(t, append(s.e.Topics(), s.e.CheckpointTopic()), time.Second)
		for _, r := range all {
			if r.Topic != s.e.CheckpointTopic() {
				recs = append(recs, r)
			}
		}
		txr = harness.CheckTransactions(all, s.e.CheckpointTopic(), s.e.CheckpointKey(t), events)
		extra = strings.TrimSpace(extra + " read_committed " + txr.String())
	} else {
		recs = s.e.Bed.ConsumeAll(t, s.e.Topics(), time.Second)
	}
	rep := harness.Check(harness.History{
		Committed:  events,
		Records:    harness.FromKafka(recs),
		Faults:     s.faults.List(),
		RolledBack: s.w.RolledBack(),
	})
	t.Logf("RESULT %s %s faults=[%s] rolled_back=%d outcome_unknown=%d %s",
		t.Name(), rep, s.faults.Summary(), len(s.w.RolledBack()), s.w.Unknown(), extra)
	if !rep.OK() {
		t.Errorf("invariants violated: %s", rep.Summary())
	}
	if s.eos && rep.Duplicates != 0 {
		t.Errorf("--exactly-once: a read_committed consumer read %d duplicates, want 0: %s", rep.Duplicates, rep.Summary())
	}
	if s.eos && !txr.OK() {
		t.Errorf("--exactly-once: a consumer saw part of a transaction: %s\n  %s", txr, strings.Join(txr.Problems, "\n  "))
	}
	if rep.Events < s.events {
		t.Errorf("%d events committed, the scenario wants at least %d", rep.Events, s.events)
	}
	if len(s.w.RolledBack()) == 0 && s.w.Rollback > 0 {
		t.Errorf("the workload rolled nothing back: phantoms were not put to the test")
	}
	return rep
}

// stopRelay stops relay gracefully and checks the exit code.
func stopRelay(t *testing.T, relay *harness.Relay) {
	t.Helper()
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// defaultWorkload commits about a thousand events a second on the test
// machine: 1-10 rows per transaction, some rolled back, some with a
// business row.
func defaultWorkload(events int) *harness.Workload {
	return &harness.Workload{Writers: 3, Events: events, Aggregates: 200, MaxTxRows: 10, Rollback: 0.1, Business: 0.3, Pause: 2 * time.Millisecond}
}
