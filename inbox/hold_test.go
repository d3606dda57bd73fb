package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failUntil is a Handler that fails the record of id bad until released.
func failUntil(bad string, released *atomic.Bool) Handler {
	return func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if string(header(r, "id")) == bad && !released.Load() {
			return errors.New("the account does not exist yet")
		}
		return record(ctx, tx, r)
	}
}

// TestHoldKey: under OnFailure HoldKey a record that fails for good holds
// its key: the key's later records wait behind it, the other key flows,
// nothing is dead-lettered, the offset stays before the held record; the
// cause fixed, the key's records are applied in order.
func TestHoldKey(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "a-1", 1), rec("a", "a-2", 2), rec("a", "a-3", 3), rec("b", "b-1", 1), rec("b", "b-2", 2), rec("a", "a-4", 4), rec("b", "b-3", 3))
	var released atomic.Bool
	cfg := f.config(failUntil("a-2", &released))
	cfg.MaxAttempts = 2
	cfg.OnFailure = HoldKey
	c := start(t, cfg)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.c.Collector())
	held := fmt.Sprintf(`walrelay_inbox_held_records{partition=0,topic=%s}`, f.topic)
	waitFor(t, "b's records applied and a's held", func() bool {
		return c.c.Stats().Applied == 4 && gather(t, reg)[held] == 3
	})
	if n := f.count(t, `SELECT count(*) FROM effects WHERE key = 'a'`); n != 1 {
		t.Errorf("%d effects of key a, want 1 (a-1; a-2 held, a-3 and a-4 behind it)", n)
	}
	waitFor(t, "the offset committed up to the held record", func() bool { return f.committed(t, 0) == 1 })
	released.Store(true)
	waitFor(t, "key a released", func() bool { return c.c.Stats().Applied == 7 })
	c.Stop(t)
	if s := c.c.Stats(); s.DeadLettered != 0 || s.Duplicates != 0 {
		t.Errorf("stats %+v, want nothing dead-lettered or duplicated", s)
	}
	if n := f.count(t, `SELECT count(*) FROM (SELECT seq <> lag(seq) OVER (PARTITION BY key ORDER BY pos) + 1 AS gap FROM effects) x WHERE gap`); n != 0 {
		t.Errorf("%d effects not right after the previous one of their key", n)
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 7 {
		t.Errorf("%d effects, want 7", n)
	}
	f.offsetsAtEnd(t, f.topic)
}

// TestHoldKeyRestart: a member stopped while it holds a key commits no
// offset past the held record: the next run sees the held record and the
// ones after it again (those applied are duplicates) and, the cause
// fixed, applies the key's records in order.
func TestHoldKeyRestart(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "a-1", 1), rec("a", "a-2", 2), rec("b", "b-1", 1), rec("a", "a-3", 3))
	var released atomic.Bool
	cfg := f.config(failUntil("a-2", &released))
	cfg.MaxAttempts = 1
	cfg.OnFailure = HoldKey
	c := start(t, cfg)
	waitFor(t, "b-1 applied, a held", func() bool { return c.c.Stats().Applied == 2 })
	c.Stop(t)
	if got := f.committed(t, 0); got != 1 {
		t.Errorf("committed offset %d, want 1 (the held record's)", got)
	}
	released.Store(true)
	again := start(t, cfg)
	waitFor(t, "a-2 and a-3 applied", func() bool { return again.c.Stats().Applied == 2 })
	again.Stop(t)
	if s := again.c.Stats(); s.Duplicates != 1 {
		t.Errorf("second run %+v, want b-1 as the one duplicate", s)
	}
	if n := f.count(t, `SELECT count(*) FROM (SELECT seq <> lag(seq) OVER (PARTITION BY key ORDER BY pos) + 1 AS gap FROM effects) x WHERE gap`); n != 0 {
		t.Errorf("%d effects not right after the previous one of their key", n)
	}
	f.offsetsAtEnd(t, f.topic)
}

// TestHalt: under OnFailure Halt the partition waits at a record that
// failed MaxAttempts times, nothing dead-lettered; the cause fixed, it
// goes on.
func TestHalt(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "a-1", 1), rec("b", "b-1", 1))
	var released atomic.Bool
	cfg := f.config(failUntil("a-1", &released))
	cfg.MaxAttempts = 1
	cfg.OnFailure = Halt
	c := start(t, cfg)
	waitFor(t, "a-1 retried past MaxAttempts", func() bool { return c.c.Stats().Retries >= 3 })
	if s := c.c.Stats(); s.Applied != 0 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v, want the partition halted: nothing applied or dead-lettered", s)
	}
	released.Store(true)
	waitFor(t, "both applied", func() bool { return c.c.Stats().Applied == 2 })
	c.Stop(t)
	if s := c.c.Stats(); s.DeadLettered != 0 {
		t.Errorf("stats %+v, want nothing dead-lettered", s)
	}
	f.offsetsAtEnd(t, f.topic)
}
