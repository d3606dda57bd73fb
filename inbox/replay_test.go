package inbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeadLetterReplay: a record whose Handler fails while a cause lasts
// is dead-lettered and the records after it are applied; the cause fixed,
// its dead letter is replayed (Redrive, produced to the original topic)
// and its effect is applied exactly once; a second replay of the same dead
// letter is a duplicate.
func TestDeadLetterReplay(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "good-1", 1), rec("a", "bad", 2), rec("a", "good-2", 3))
	var broken atomic.Bool
	broken.Store(true)
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if string(header(r, "id")) == "bad" && broken.Load() {
			return errors.New("the customer's account does not exist yet")
		}
		return record(ctx, tx, r)
	}
	cfg := f.config(h)
	cfg.MaxAttempts = 2
	c := start(t, cfg)
	waitFor(t, "bad dead-lettered and good-2 applied", func() bool { s := c.c.Stats(); return s.DeadLettered == 1 && s.Applied == 2 })

	broken.Store(false) // the cause fixed
	dls := f.b.ConsumeAll(t, []string{f.group + ".dlq"}, time.Second)
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	replay, err := Redrive(dls[0], "")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range replay.Headers {
		if h.Key == HeaderErrorClass || h.Key == HeaderTopic || h.Key == HeaderAttempts {
			t.Errorf("replayed record keeps dead-letter header %s", h.Key)
		}
	}
	if replay.Topic != f.topic || string(replay.Key) != "a" || string(replay.Value) != "2" || string(header(replay, "id")) != "bad" {
		t.Errorf("replay record: topic %s key %q value %q id %q, want %s a 2 bad", replay.Topic, replay.Key, replay.Value, header(replay, "id"), f.topic)
	}
	f.produce(t, replay)
	waitFor(t, "the replayed record handled", func() bool { s := c.c.Stats(); return s.Applied+s.Duplicates >= 3 })
	if n := f.count(t, `SELECT count(*) FROM effects WHERE id = 'bad'`); n != 1 {
		t.Fatalf("the replayed dead letter's effect applied %d times, want 1 (stats %+v)", n, c.c.Stats())
	}

	// The operator replays it again: a duplicate, not applied twice.
	f.produce(t, replay)
	waitFor(t, "the second replay handled", func() bool { s := c.c.Stats(); return s.Applied+s.Duplicates >= 4 })
	c.Stop(t)
	if s := c.c.Stats(); s.Applied != 3 || s.Duplicates != 1 || s.DeadLettered != 1 {
		t.Errorf("stats %+v, want 3 applied, 1 duplicate, 1 dead-lettered", s)
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 3 {
		t.Errorf("%d effects, want 3 (good-1, bad, good-2 once each)", n)
	}
	f.offsetsAtEnd(t, f.topic)
}
