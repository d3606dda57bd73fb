package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBatchHandler: a BatchHandler gets each partition's records at hand
// as one batch, in one transaction with their ids: the effects of 90 ids
// applied once each, in each key's order, with batches of more than one
// record; ids repeated in the topic (in one batch or across batches) and
// a whole second delivery never reach it (Stats.Duplicates); a batch
// holding a bad record fails, its records are handled one by one, and
// only the bad one is dead-lettered (MaxAttempts attempts alone), as is a
// record without an id; the ids are recorded processed except the bad
// one; the offsets end at the end offsets.
func TestBatchHandler(t *testing.T) {
	f := newFixture(t, 3)
	var recs, again []*kgo.Record
	for i := range 90 {
		key := fmt.Sprintf("k%d", i%9)
		recs = append(recs, rec(key, fmt.Sprintf("id-%d", i), i))
		if i%5 == 0 { // delivered again at once
			recs = append(recs, rec(key, fmt.Sprintf("id-%d", i), i))
		}
		if i < 30 { // delivered again later
			again = append(again, rec(key, fmt.Sprintf("id-%d", i), i))
		}
		if i == 40 {
			recs = append(recs, rec(key, "bad", 1000), rec(key, "", 1001))
		}
	}
	f.produce(t, recs...)

	var mu sync.Mutex
	var calls [][]*kgo.Record
	failedWith := map[string]bool{} // ids in a call that failed
	bh := func(ctx context.Context, tx pgx.Tx, rs []*kgo.Record) error {
		var ids, keys []string
		var seqs []int64
		for _, r := range rs {
			ids, keys = append(ids, string(header(r, "id"))), append(keys, string(r.Key))
			var n int64
			fmt.Sscan(string(r.Value), &n)
			seqs = append(seqs, n)
		}
		mu.Lock()
		calls = append(calls, rs)
		mu.Unlock()
		// One statement for the batch, in the batch's order.
		if _, err := tx.Exec(ctx, `INSERT INTO effects (id, key, seq) SELECT id, key, seq FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(id, key, seq, n) ORDER BY n`,
			ids, keys, seqs); err != nil {
			return err
		}
		if slices.Contains(ids, "bad") {
			mu.Lock()
			for _, id := range ids {
				failedWith[id] = true
			}
			mu.Unlock()
			return errors.New("bad record in the batch")
		}
		return nil
	}
	cfg := f.config(nil)
	cfg.BatchHandler = bh
	cfg.MaxAttempts = 2
	cfg.LeaveGroupOnStop = true
	r := start(t, cfg)
	waitFor(t, "the first delivery handled", func() bool {
		s := r.c.Stats()
		return s.Applied == 90 && s.Duplicates == 18 && s.DeadLettered == 2
	})
	f.produce(t, again...)
	waitFor(t, "the second delivery skipped", func() bool { return r.c.Stats().Duplicates == 18+30 })
	r.Stop(t)

	if s := r.c.Stats(); s.Applied != 90 || s.Duplicates != 48 || s.DeadLettered != 2 {
		t.Errorf("stats %+v, want 90 applied, 48 duplicates, 2 dead-lettered", s)
	}
	seen := map[string]int{}
	biggest := 0
	for _, rs := range calls {
		biggest = max(biggest, len(rs))
		inCall := map[string]bool{}
		for i, r := range rs {
			id := string(header(r, "id"))
			if inCall[id] {
				t.Errorf("id %s twice in one batch", id)
			}
			inCall[id] = true
			seen[id]++
			if r.Partition != rs[0].Partition || i > 0 && r.Offset <= rs[i-1].Offset {
				t.Errorf("batch not of one partition in offset order: %s/%d@%d after %d@%d", r.Topic, r.Partition, r.Offset, rs[0].Partition, rs[max(i-1, 0)].Offset)
			}
		}
	}
	if biggest < 2 {
		t.Errorf("the largest batch had %d record(s), want several (the backlog of a partition at hand)", biggest)
	}
	for i := range 90 {
		id := fmt.Sprintf("id-%d", i)
		// N.B. an id of the failed batch was handed again on its own.
		if want := 1; seen[id] != want && !failedWith[id] || failedWith[id] && seen[id] != 2 {
			t.Errorf("id %s handed to the BatchHandler %d times (in the failed batch: %v), want once (twice if so)", id, seen[id], failedWith[id])
		}
	}
	inBatch := 0 // calls of several records with bad
	for _, rs := range calls {
		if len(rs) > 1 && slices.ContainsFunc(rs, func(r *kgo.Record) bool { return string(header(r, "id")) == "bad" }) {
			inBatch++
		}
	}
	if seen["bad"] != inBatch+cfg.MaxAttempts || inBatch > 1 || seen[""] != 0 {
		t.Errorf("bad handed %d times (%d in a batch), the record without id %d, want at most once in a batch + %d alone, and 0", seen["bad"], inBatch, seen[""], cfg.MaxAttempts)
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 90 {
		t.Errorf("%d effects, want 90", n)
	}
	if n := f.count(t, `SELECT count(DISTINCT id) FROM effects WHERE id LIKE 'id-%'`); n != 90 {
		t.Errorf("%d distinct ids in effects, want 90", n)
	}
	if n := f.count(t, `SELECT count(*) FROM (SELECT seq < lag(seq) OVER (PARTITION BY key ORDER BY pos) AS back FROM effects) x WHERE back`); n != 0 {
		t.Errorf("%d effects applied before an earlier one of the same key", n)
	}
	if n := f.count(t, `SELECT count(*) FROM inbox_processed WHERE consumer = $1 AND id LIKE 'id-%'`, f.group); n != 90 {
		t.Errorf("%d ids processed, want 90", n)
	}
	if n := f.count(t, `SELECT count(*) FROM inbox_processed WHERE id = 'bad'`); n != 0 {
		t.Errorf("bad marked processed, want not (dead-lettered)")
	}
	dl := f.b.ConsumeAll(t, []string{cfg.Group + ".dlq"}, time.Second)
	var classes []string
	for _, d := range dl {
		classes = append(classes, string(header(d, "id"))+":"+string(header(d, HeaderErrorClass)))
	}
	slices.Sort(classes)
	if want := []string{":" + ClassMissingID, "bad:" + ClassHandler}; !slices.Equal(classes, want) {
		t.Errorf("dead letters %v, want %v", classes, want)
	}
	f.offsetsAtEnd(t, f.topic)
}

// TestBatchHandlerHoldKey: under OnFailure HoldKey a batch with a record
// that fails for good falls back to one record a transaction, holds that
// record's key (its later records wait behind it, in the same batch and
// the next ones) while the other key flows, dead-letters nothing, and
// keeps the offset before the held record; the cause fixed, the key's
// records are applied in order.
func TestBatchHandlerHoldKey(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "a-1", 1), rec("a", "a-2", 2), rec("b", "b-1", 1), rec("a", "a-3", 3), rec("b", "b-2", 2), rec("a", "a-4", 4), rec("b", "b-3", 3))
	var released atomic.Bool
	one := failUntil("a-2", &released)
	cfg := f.config(nil)
	var batches atomic.Int64 // calls of more than one record
	cfg.BatchHandler = func(ctx context.Context, tx pgx.Tx, rs []*kgo.Record) error {
		if len(rs) > 1 {
			batches.Add(1)
		}
		for _, r := range rs {
			if err := one(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	}
	cfg.MaxAttempts = 2
	cfg.OnFailure = HoldKey
	c := start(t, cfg)
	waitFor(t, "b's records and a-1 applied, a's others held", func() bool { return c.c.Stats().Applied == 4 })
	if n := f.count(t, `SELECT count(*) FROM effects WHERE key = 'a'`); n != 1 {
		t.Errorf("%d effects of key a, want 1 (a-1; a-2 held, a-3 and a-4 behind it)", n)
	}
	waitFor(t, "the offset committed up to the held record", func() bool { return f.committed(t, 0) == 1 })
	released.Store(true)
	waitFor(t, "key a released", func() bool { return c.c.Stats().Applied == 7 })
	c.Stop(t)
	if batches.Load() == 0 {
		t.Errorf("no call of the BatchHandler had more than one record")
	}
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
