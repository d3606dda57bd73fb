package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/test/testbed"
)

// fixture is a test's database (with the inbox table and an effects
// table), topic and group on the bed.
type fixture struct {
	b     *testbed.Bed
	dsn   string
	pool  *pgxpool.Pool
	topic string
	group string
}

func newFixture(t *testing.T, partitions int32) *fixture { return newFixtureTB(t, partitions) }

func newFixtureTB(t testing.TB, partitions int32) *fixture {
	t.Helper()
	b := testbed.Get(t)
	f := &fixture{b: b, dsn: b.NewDatabase(t), topic: "inbox_" + uniq(), group: "g_" + uniq()}
	f.pool = f.newPool(t)
	if err := CreateTable(context.Background(), f.pool, ""); err != nil {
		t.Fatal(err)
	}
	b.Exec(t, f.dsn, `CREATE TABLE effects (pos bigserial PRIMARY KEY, id text NOT NULL, key text NOT NULL, seq bigint NOT NULL)`)
	b.CreateTopic(t, f.topic, partitions)
	return f
}

func (f *fixture) newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 16 // one per partition being handled, and more
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func uniq() string { return strconv.FormatInt(time.Now().UnixNano()%1e12, 36) }

// produce writes records (key, id header; "" means none) with value seq.
func (f *fixture) produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...), kgo.DefaultProduceTopic(f.topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func rec(key, id string, seq int) *kgo.Record {
	r := &kgo.Record{Key: []byte(key), Value: []byte(strconv.Itoa(seq))}
	if id != "" {
		r.Headers = []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "eventType", Value: []byte("T")}}
	}
	return r
}

// record inserts the record's effect.
func record(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO effects (id, key, seq) VALUES ($1, $2, $3::bigint)`, string(header(r, "id")), string(r.Key), string(r.Value))
	return err
}

func (f *fixture) config(h Handler) Config {
	return Config{
		Brokers: f.b.Brokers(), Group: f.group, Topics: []string{f.topic}, Pool: f.pool, Handler: h,
		RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond,
	}
}

// running is a Consumer in the background.
type running struct {
	c    *Consumer
	stop context.CancelFunc
	err  chan error
}

func start(t *testing.T, cfg Config) *running {
	t.Helper()
	c, err := New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, stop: cancel, err: make(chan error, 1)}
	go func() { r.err <- c.Run(ctx) }()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Stop ends Run and checks it returned context.Canceled.
func (r *running) Stop(t *testing.T) {
	t.Helper()
	if r.err == nil {
		return
	}
	r.stop()
	select {
	case err := <-r.err:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of its context ending")
	}
	r.err = nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// offsetsAtEnd fails unless the group's committed offsets equal the
// topic's end offsets.
func (f *fixture) offsetsAtEnd(t *testing.T, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(context.Background(), f.group)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if o.Offset > 0 && (!ok || c.At != o.Offset) {
			t.Errorf("%s/%d: committed offset %d (found %v), end offset %d", o.Topic, o.Partition, c.At, ok, o.Offset)
		}
	})
}

// describeGroup describes the fixture's group.
func (f *fixture) describeGroup(t *testing.T) (kadm.DescribedGroup, error) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	groups, err := kadm.NewClient(cl).DescribeGroups(context.Background(), f.group)
	return groups[f.group], err
}

// membersAssigned is how many members of the group own partitions.
func (f *fixture) membersAssigned(t *testing.T) int {
	t.Helper()
	g, err := f.describeGroup(t)
	if err != nil {
		return 0
	}
	n := 0
	for _, m := range g.Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				if len(tp.Partitions) > 0 {
					n++
					break
				}
			}
		}
	}
	return n
}

// TestAppliesEachIDOnce: records delivered with repeated ids apply their
// effect once per id, in each key's order; the repeats take the conflict
// path (Stats.Duplicates); the offsets end at the end offsets.
func TestAppliesEachIDOnce(t *testing.T) {
	f := newFixture(t, 3)
	var recs []*kgo.Record
	for i := range 60 {
		key := fmt.Sprintf("k%d", i%6)
		recs = append(recs, rec(key, fmt.Sprintf("id-%d", i), i))
		if i%4 == 0 { // delivered again, as after a relay restart
			recs = append(recs, rec(key, fmt.Sprintf("id-%d", i), i))
		}
	}
	f.produce(t, recs...)
	r := start(t, f.config(record))
	waitFor(t, "every record handled", func() bool { s := r.c.Stats(); return s.Applied+s.Duplicates >= int64(len(recs)) })
	r.Stop(t)
	s := r.c.Stats()
	if s.Applied != 60 || s.Duplicates != 15 {
		t.Errorf("stats %+v, want 60 applied and 15 duplicates", s)
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 60 {
		t.Errorf("%d effects, want 60", n)
	}
	if n := f.count(t, `SELECT count(DISTINCT id) FROM effects`); n != 60 {
		t.Errorf("%d distinct ids in effects, want 60", n)
	}
	if n := f.count(t, `SELECT count(*) FROM inbox_processed WHERE consumer = $1`, f.group); n != 60 {
		t.Errorf("%d ids in inbox_processed, want 60", n)
	}
	// Per key, seq increases in the order the effects were applied.
	if n := f.count(t, `SELECT count(*) FROM (SELECT seq < lag(seq) OVER (PARTITION BY key ORDER BY pos) AS back FROM effects) x WHERE back`); n != 0 {
		t.Errorf("%d effects applied before an earlier one of the same key", n)
	}
	f.offsetsAtEnd(t, f.topic)
}

// TestHandlerFailureDeadLetters: a record whose Handler always fails is
// tried MaxAttempts times and dead-lettered with walrelay's error headers,
// not marked processed; a Permanent error dead-letters at once; a record
// without an id is dead-lettered; the records after them are applied.
func TestHandlerFailureDeadLetters(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "good-1", 1), rec("a", "bad", 2), rec("a", "", 3), rec("a", "perm", 4), rec("a", "good-2", 5))
	var mu sync.Mutex
	calls := map[string]int{}
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		id := string(header(r, "id"))
		mu.Lock()
		calls[id]++
		mu.Unlock()
		switch id {
		case "bad":
			// The effect is written, then the handler fails: it must be
			// rolled back.
			if err := record(ctx, tx, r); err != nil {
				return err
			}
			return errors.New("downstream says no")
		case "perm":
			return Permanent(errors.New("payload version 9 unknown"))
		}
		return record(ctx, tx, r)
	}
	cfg := f.config(h)
	cfg.MaxAttempts = 3
	// N.B. the group is deleted below: a static member (the default)
	// leaves it only with LeaveGroupOnStop.
	cfg.LeaveGroupOnStop = true
	r := start(t, cfg)
	waitFor(t, "good-2 applied", func() bool { return r.c.Stats().Applied == 2 })
	r.Stop(t)
	if calls["bad"] != 3 || calls["perm"] != 1 || calls["good-1"] != 1 || calls["good-2"] != 1 || calls[""] != 0 {
		t.Errorf("handler calls %v, want bad 3, perm 1, good-1 1, good-2 1, none without id", calls)
	}
	if s := r.c.Stats(); s.DeadLettered != 3 || s.Retries != 2 {
		t.Errorf("stats %+v, want 3 dead-lettered, 2 retries", s)
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d effects, want 2 (good-1, good-2; bad's rolled back)", n)
	}
	if n := f.count(t, `SELECT count(*) FROM inbox_processed WHERE id IN ('bad', 'perm')`); n != 0 {
		t.Errorf("%d of bad, perm marked processed, want 0 (dead-lettered, not applied: a replay must apply them)", n)
	}
	dl := f.b.ConsumeAll(t, []string{cfg.Group + ".dlq"}, time.Second)
	if len(dl) != 3 {
		t.Fatalf("%d dead-letter records, want 3", len(dl))
	}
	want := []map[string]string{
		{HeaderErrorClass: ClassHandler, HeaderErrorMessage: "downstream says no", HeaderAttempts: "3", HeaderEventID: "bad", HeaderOffset: "1", "id": "bad", "eventType": "T"},
		{HeaderErrorClass: ClassMissingID, HeaderAttempts: "0", HeaderOffset: "2"},
		{HeaderErrorClass: ClassPermanent, HeaderErrorMessage: "payload version 9 unknown", HeaderAttempts: "1", HeaderEventID: "perm", HeaderOffset: "3"},
	}
	for i, d := range dl {
		got := map[string]string{}
		for _, h := range d.Headers {
			got[h.Key] = string(h.Value)
		}
		for k, v := range want[i] {
			if got[k] != v {
				t.Errorf("dead letter %d: header %s = %q, want %q (headers %v)", i, k, got[k], v, got)
			}
		}
		if got[HeaderTopic] != f.topic || got[HeaderPartition] != "0" || got[HeaderGroup] != f.group {
			t.Errorf("dead letter %d: origin headers %v, want topic %s partition 0 group %s", i, got, f.topic, f.group)
		}
		if string(d.Key) != "a" {
			t.Errorf("dead letter %d: key %q, want the original a", i, d.Key)
		}
	}
	if string(dl[0].Value) != "2" || string(dl[1].Value) != "3" || string(dl[2].Value) != "4" {
		t.Errorf("dead-letter values %q %q %q, want the originals 2 3 4", dl[0].Value, dl[1].Value, dl[2].Value)
	}
	f.offsetsAtEnd(t, f.topic)

	// The group's offsets deleted, the same group reads everything again:
	// the applied ids are duplicates; the dead-lettered ones are not
	// marked, so they are tried again (and dead-lettered again, the cause
	// still there), as is the record without an id.
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).DeleteGroup(context.Background(), f.group); err != nil {
		t.Fatalf("delete group: %v", err)
	}
	clear(calls)
	again := start(t, cfg)
	waitFor(t, "the records again", func() bool { s := again.c.Stats(); return s.Duplicates+s.DeadLettered >= 5 })
	again.Stop(t)
	if s := again.c.Stats(); s.Duplicates != 2 || s.DeadLettered != 3 || s.Applied != 0 || calls["bad"] != 3 || calls["perm"] != 1 || len(calls) != 2 {
		t.Errorf("second pass: stats %+v, handler calls %v; want 2 duplicates, 3 dead-lettered, bad tried 3 times, perm once", s, calls)
	}
}

// TestRevokeHandsOverCleanly: a second member joins while the first holds
// a transaction open for 3 s in each of its partitions; the rebalance
// waits for them, and the offsets of everything the first member finished
// are committed before its partitions move, so the second member starts
// exactly there: every record is applied once and none reaches either
// member twice.
func TestRevokeHandsOverCleanly(t *testing.T) {
	f := newFixture(t, 4)
	wave := func(from int) {
		var recs []*kgo.Record
		for i := from; i < from+100; i++ {
			recs = append(recs, rec(fmt.Sprintf("k%d", i%16), fmt.Sprintf("id-%d", i), i))
		}
		f.produce(t, recs...)
	}
	wave(0)
	var mu sync.Mutex
	held := map[int32]bool{}
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if err := record(ctx, tx, r); err != nil {
			return err
		}
		mu.Lock()
		first := !held[r.Partition]
		held[r.Partition] = true
		mu.Unlock()
		if first {
			time.Sleep(3 * time.Second) // the transaction open while the group rebalances
		}
		return nil
	}
	cfg := f.config(h)
	// N.B. a short heartbeat: member A hears of the rebalance while its
	// transactions are still open.
	cfg.KafkaOpts = []kgo.Opt{kgo.HeartbeatInterval(200 * time.Millisecond)}
	a := start(t, cfg)
	waitFor(t, "member A to hold a transaction open", func() bool { mu.Lock(); defer mu.Unlock(); return len(held) > 0 })
	// N.B. a pool of its own, as another process would have: A's open
	// transactions hold every connection of A's.
	cfgB := cfg
	cfgB.Pool = f.newPool(t)
	cfgB.InstanceID = DefaultInstanceID() + "-b" // two members of one group need an instance id each
	b := start(t, cfgB)
	// The second wave once both members own partitions, so that B has
	// records of its own to apply.
	waitFor(t, "both members to own partitions", func() bool { return f.membersAssigned(t) == 2 })
	wave(100)
	waitFor(t, "every record handled", func() bool {
		sa, sb := a.c.Stats(), b.c.Stats()
		return sa.Applied+sb.Applied+sa.Duplicates+sb.Duplicates >= 200
	})
	if mu.Lock(); len(held) != 4 {
		t.Errorf("transactions held open in partitions %v, want all 4", held)
	}
	mu.Unlock()
	a.Stop(t)
	b.Stop(t)
	sa, sb := a.c.Stats(), b.c.Stats()
	t.Logf("member A %+v, member B %+v", sa, sb)
	if sb.Applied == 0 {
		t.Errorf("member B applied nothing: no partition moved to it")
	}
	if sa.Duplicates+sb.Duplicates != 0 || sa.CommitErrors+sb.CommitErrors != 0 {
		t.Errorf("a record reached a member twice or a commit failed across the rebalance: A %+v, B %+v", sa, sb)
	}
	if n := f.count(t, `SELECT count(DISTINCT id) FROM effects`); n != 200 {
		t.Errorf("%d distinct effects, want 200", n)
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 200 {
		t.Errorf("%d effects, want 200", n)
	}
	f.offsetsAtEnd(t, f.topic)
}

// TestMissingTableFailsAtStart: Run stops at once, naming the fix.
func TestMissingTableFailsAtStart(t *testing.T) {
	f := newFixture(t, 1)
	cfg := f.config(record)
	cfg.Table = "app.nope"
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "inbox.CreateTable") {
		t.Fatalf("Run returned %v, want the missing table and how to create it", err)
	}
	t.Logf("Run: %v", err)
}

// TestDeleteBefore deletes old ids (in batches) and keeps the new ones.
func TestDeleteBefore(t *testing.T) {
	f := newFixture(t, 1)
	f.b.Exec(t, f.dsn, `INSERT INTO inbox_processed (consumer, id, processed_at) SELECT 'g', 'old-' || i, now() - interval '10 days' FROM generate_series(1, 25000) i`)
	f.b.Exec(t, f.dsn, `INSERT INTO inbox_processed (consumer, id) SELECT 'g', 'new-' || i FROM generate_series(1, 10) i`)
	n, err := DeleteBefore(context.Background(), f.pool, "", time.Now().Add(-7*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != 25000 {
		t.Errorf("deleted %d, want 25000", n)
	}
	if left := f.count(t, `SELECT count(*) FROM inbox_processed`); left != 10 {
		t.Errorf("%d ids left, want the 10 new ones", left)
	}
}

// TestDatabaseLossIsNotAnAttempt: the handler's connection is terminated
// under it (as in a PostgreSQL restart); with MaxAttempts 1 the record is
// still not dead-lettered: it is tried again once the database answers,
// and applied once.
func TestDatabaseLossIsNotAnAttempt(t *testing.T) {
	f := newFixture(t, 1)
	f.produce(t, rec("a", "id-1", 1), rec("a", "id-2", 2))
	var killed atomic.Int32
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if err := record(ctx, tx, r); err != nil {
			return err
		}
		if string(header(r, "id")) == "id-1" && killed.Add(1) == 1 {
			if _, err := f.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, tx.Conn().PgConn().PID()); err != nil {
				return fmt.Errorf("terminate: %w", err)
			}
			_, err := tx.Exec(ctx, `SELECT 1`)
			return err
		}
		return nil
	}
	cfg := f.config(h)
	cfg.MaxAttempts = 1
	r := start(t, cfg)
	waitFor(t, "both applied", func() bool { return r.c.Stats().Applied == 2 })
	r.Stop(t)
	if s := r.c.Stats(); s.DeadLettered != 0 || s.Retries < 1 || killed.Load() != 2 {
		t.Errorf("stats %+v, handler ran %d times on id-1; want it retried (not dead-lettered) and applied", s, killed.Load())
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d effects, want 2", n)
	}
}
