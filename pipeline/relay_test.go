package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// TestErrorClasses: which errors end Run, which restart it, and the cause
// each restart is counted under.
func TestErrorClasses(t *testing.T) {
	slotLost := fmt.Errorf("%w: slot x", replication.ErrSlotLost)
	tests := []struct {
		name      string
		err       error
		setup     bool
		permanent bool
		cause     string
		waits     error
	}{
		{"columns", onPostgres(fmt.Errorf("%w: table t has no column", ErrColumns)), true, true, "postgres", nil},
		{"topic missing", onKafka(fmt.Errorf("produce: %w", sink.ErrTopicMissing)), true, true, "kafka", nil},
		{"slot lost", onPostgres(slotLost), false, true, "postgres", nil},
		{"poison with halt", onKafka(fmt.Errorf("x: %w", sink.ErrPoison)), false, true, "kafka", nil},
		{"slot in use", onPostgres(fmt.Errorf("%w: active", replication.ErrSlotInUse)), false, false, "postgres", replication.ErrSlotInUse},
		{"slot not ready", onPostgres(fmt.Errorf("%w: creating", replication.ErrSlotNotReady)), false, false, "postgres", replication.ErrSlotNotReady},
		{"slot being recovered", onPostgres(fmt.Errorf("%w: another walrelay", replication.ErrSlotRecovering)), false, false, "postgres", replication.ErrSlotRecovering},
		{"recovery unfinished", onPostgres(unfinished(fmt.Errorf("%w: a recover", kafkastate.ErrRecoveryUnfinished))), true, true, "postgres", nil},
		{"marker topic unreadable", preflightFailed(fmt.Errorf("read slot history: %w", markerReadError{errors.New("list end offsets of walrelay.checkpoints: dial tcp: connection refused")})), false, false, "kafka", nil},
		{"preflight", preflightFailed(errors.New("look up replication slot: conn closed")), false, false, "postgres", nil},
		{"connection reset", onPostgres(errors.New("receive: connection reset")), false, false, "postgres", nil},
		{"record failed", onKafka(context.DeadlineExceeded), false, false, "kafka", nil},
		{"decode", errors.New("decode message at 0/1: truncated"), false, false, "other", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsSetupError(tt.err); got != tt.setup {
				t.Errorf("IsSetupError = %v, want %v", got, tt.setup)
			}
			if got := permanent(tt.err); got != tt.permanent {
				t.Errorf("permanent = %v, want %v", got, tt.permanent)
			}
			if got := cause(tt.err); got != tt.cause {
				t.Errorf("cause = %q, want %q", got, tt.cause)
			}
			if kind, _ := waitFor(tt.err); kind != tt.waits {
				t.Errorf("waitFor = %v, want %v", kind, tt.waits)
			}
		})
	}
}

// TestMemoryLimit: the soft limit is --max-inflight-bytes plus the 4 MiB
// replication buffer plus 16 MiB of headroom (README's memory bound).
func TestMemoryLimit(t *testing.T) {
	for _, tt := range []struct{ inflight, want int64 }{
		{0, (16 + 4 + 16) << 20}, // the default, 16 MiB
		{4 << 20, (4 + 4 + 16) << 20},
		{1 << 30, 1<<30 + 20<<20},
	} {
		c := Config{Sink: sink.Config{MaxInflightBytes: int(tt.inflight)}}
		if got := c.MemoryLimit(); got != tt.want {
			t.Errorf("MaxInflightBytes %d: MemoryLimit %d, want %d", tt.inflight, got, tt.want)
		}
	}
}

// TestUnfinishedIsBoth: the history's unfinished-recovery error is
// replication's (pgcatalog waits on it) and still kafkastate's (the
// relay recovers it with --recover-missing-slot).
func TestUnfinishedIsBoth(t *testing.T) {
	err := unfinished(fmt.Errorf("%w: a recover of slot s", kafkastate.ErrRecoveryUnfinished))
	if !errors.Is(err, replication.ErrRecoveryUnfinished) || !errors.Is(err, kafkastate.ErrRecoveryUnfinished) || !IsSetupError(err) {
		t.Errorf("unfinished(...) = %v: replication's %v, kafkastate's %v, setup %v; want all", err,
			errors.Is(err, replication.ErrRecoveryUnfinished), errors.Is(err, kafkastate.ErrRecoveryUnfinished), IsSetupError(err))
	}
	if other := unfinished(errors.New("read markers: timeout")); errors.Is(other, replication.ErrRecoveryUnfinished) {
		t.Errorf("unfinished(%v) is ErrRecoveryUnfinished", other)
	}
}
