package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceTo writes records to one partition.
func (f *fixture) produceTo(t *testing.T, partition int32, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...), kgo.DefaultProduceTopic(f.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, r := range recs {
		r.Partition = partition
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestRetryStallsOnlyItsPartition: a record of partition 0 in retry (its
// cause lasting) does not hold back partition 1: the records produced to
// partition 1 while it retries are applied and their offsets committed;
// the cause fixed, the record is applied once and partition 0 goes on.
func TestRetryStallsOnlyItsPartition(t *testing.T) {
	f := newFixture(t, 2)
	f.produceTo(t, 0, rec("a", "stuck", 1), rec("a", "after-stuck", 2))
	var released atomic.Bool
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if string(header(r, "id")) == "stuck" && !released.Load() {
			return errors.New("the account service does not answer")
		}
		return record(ctx, tx, r)
	}
	cfg := f.config(h)
	cfg.MaxAttempts = 1 << 30 // in retry until released
	c := start(t, cfg)
	waitFor(t, "the record of partition 0 in retry", func() bool { return c.c.Stats().Retries >= 2 })

	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, rec("b", fmt.Sprintf("p1-%d", i), i))
	}
	f.produceTo(t, 1, recs...)
	waitFor(t, "partition 1's 20 records applied while partition 0 retries", func() bool { return c.c.Stats().Applied >= 20 })
	if n := f.count(t, `SELECT count(*) FROM effects WHERE key = 'a'`); n != 0 {
		t.Fatalf("%d effects of partition 0 applied, want none while its first record retries", n)
	}
	waitFor(t, "partition 1's offset committed", func() bool { return f.committed(t, 1) == 20 })

	released.Store(true)
	waitFor(t, "partition 0 applied", func() bool { return c.c.Stats().Applied == 22 })
	c.Stop(t)
	if n := f.count(t, `SELECT count(*) FROM (SELECT seq < lag(seq) OVER (PARTITION BY key ORDER BY pos) AS back FROM effects) x WHERE back`); n != 0 {
		t.Errorf("%d effects applied before an earlier one of the same key", n)
	}
	if n := f.count(t, `SELECT count(DISTINCT id) FROM effects`); n != 22 {
		t.Errorf("%d distinct effects, want 22", n)
	}
	f.offsetsAtEnd(t, f.topic)
}

// committed is the group's committed offset of the fixture topic's
// partition p (-1: none).
func (f *fixture) committed(t *testing.T, p int32) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadmClient(cl).FetchOffsets(ctx, f.group)
	if err != nil {
		return -1
	}
	o, ok := offs.Lookup(f.topic, p)
	if !ok {
		return -1
	}
	return o.At
}

// TestHandlerTimeout: a Handler stuck past HandlerTimeout (a statement
// that waits) has its ctx ended; the attempt counts (it is not taken for a
// database outage), so with MaxAttempts 2 the record is dead-lettered
// after two attempts, and the next record is applied.
func TestHandlerTimeout(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "slow", 1), rec("a", "next", 2))
	var calls atomic.Int32
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if string(header(r, "id")) == "slow" {
			calls.Add(1)
			_, err := tx.Exec(ctx, `SELECT pg_sleep(60)`)
			return err
		}
		return record(ctx, tx, r)
	}
	cfg := f.config(h)
	cfg.MaxAttempts = 2
	cfg.HandlerTimeout = 200 * time.Millisecond
	c := start(t, cfg)
	waitFor(t, "next applied", func() bool { return c.c.Stats().Applied == 1 })
	c.Stop(t)
	if s := c.c.Stats(); s.DeadLettered != 1 || calls.Load() != 2 {
		t.Errorf("stats %+v, %d attempts of slow; want it dead-lettered after 2 attempts", s, calls.Load())
	}
	dl := f.b.ConsumeAll(t, []string{f.group + ".dlq"}, time.Second)
	if len(dl) != 1 || string(header(dl[0], HeaderErrorClass)) != ClassHandler || !strings.Contains(string(header(dl[0], HeaderErrorMessage)), "handler timeout") {
		t.Errorf("dead letters %v, want one of class %s whose message names the handler timeout", dl, ClassHandler)
	}
}

// TestPausedPartitionResumes: with MaxPollRecords 5, a partition whose
// first record retries gets its fetching paused once 10 records are
// queued, while the other partition flows; released, it resumes and every
// record of both is applied once, in order, the offsets at the end.
func TestPausedPartitionResumes(t *testing.T) {
	t.Run("handler", func(t *testing.T) { pausedPartitionResumes(t, false) })
	// N.B. a batch takes every queued record at hand: the ranges a
	// resumed partition is fetched again must not reach it twice.
	t.Run("batch", func(t *testing.T) { pausedPartitionResumes(t, true) })
}

func pausedPartitionResumes(t *testing.T, batch bool) {
	f := newFixture(t, 2)
	var released atomic.Bool
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if string(header(r, "id")) == "a-0" && !released.Load() {
			return errors.New("not yet")
		}
		return record(ctx, tx, r)
	}
	var a, b []*kgo.Record
	for i := range 60 {
		a = append(a, rec("a", fmt.Sprintf("a-%d", i), i))
		b = append(b, rec("b", fmt.Sprintf("b-%d", i), i))
	}
	f.produceTo(t, 0, a...)
	f.produceTo(t, 1, b...)
	cfg := f.config(h)
	cfg.MaxAttempts = 1 << 30
	cfg.MaxPollRecords = 5
	if batch {
		cfg.BatchHandler = func(ctx context.Context, tx pgx.Tx, rs []*kgo.Record) error {
			for _, r := range rs {
				if err := h(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		}
		cfg.MaxBatchRecords = 1000
	}
	c := start(t, cfg)
	waitFor(t, "partition 1 applied while partition 0 retries", func() bool { return c.c.Stats().Applied == 60 })
	if n := f.count(t, `SELECT count(*) FROM effects WHERE key = 'a'`); n != 0 {
		t.Fatalf("%d effects of partition 0, want none while its first record retries", n)
	}
	released.Store(true)
	waitFor(t, "partition 0 applied", func() bool { return c.c.Stats().Applied == 120 })
	c.Stop(t)
	if s := c.c.Stats(); s.Duplicates != 0 || s.DeadLettered != 0 {
		t.Errorf("stats %+v, want no duplicate, no dead letter", s)
	}
	if n := f.count(t, `SELECT count(DISTINCT id) FROM effects`); n != 120 {
		t.Errorf("%d distinct effects, want 120", n)
	}
	if n := f.count(t, `SELECT count(*) FROM (SELECT seq <> lag(seq) OVER (PARTITION BY key ORDER BY pos) + 1 AS gap FROM effects) x WHERE gap`); n != 0 {
		t.Errorf("%d effects not right after the previous one of their key", n)
	}
	f.offsetsAtEnd(t, f.topic)
}
