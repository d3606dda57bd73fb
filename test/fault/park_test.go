package fault

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
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
	t.Parallel()
	kills, poisons := scale(6, 60), scale(4, 20)
	p := newParking(t, defaultWorkload(scale(6000, 200000)))
	s := p.s
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()

	// Poison rows for a few aggregates, spread over the run.
	slice := s.events / kills
	for i := 0; i < kills; i++ {
		relay.WaitStreaming()
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		for p.poisons < poisons && p.poisons*kills <= i*poisons {
			p.poison()
		}
		in := s.faults.Begin("kill-9")
		relay.Kill()
		in.End()
		relay = s.e.StartRelay(t)
	}
	for p.poisons < poisons {
		p.poison()
	}
	fig := p.finish(relay)
	t.Logf("FIGURES kills=%d poisons=%d %s", kills, p.poisons, fig)
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
