package inbox

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/testbed"
)

// TestInvalidIDDeadLetters: a record whose id is not valid text for
// PostgreSQL (a NUL byte; bytes that are not UTF-8) or too long for the
// table's primary key (4,000 random characters) cannot be recorded in the
// inbox table: it is dead-lettered at once (class invalid_id, its key,
// value and headers intact), never handed to the Handler, and the records
// after it, of its key and of others, in its partition and in another one,
// are applied once each; the offsets end at the end offsets. Run with a
// Handler and with a BatchHandler (the bad records would break a batch's
// id insert).
//
// Before the fix the id insert failed (SQLSTATE 22021, invalid byte
// sequence for encoding "UTF8"; 54000, index row size exceeds the btree
// maximum), read as the database's outage: the record was retried for
// ever and its partition stalled.
func TestInvalidIDDeadLetters(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testInvalidID(t, batch) })
	}
}

func testInvalidID(t *testing.T, batch bool) {
	f := newFixture(t, 2)
	nul, notUTF8 := "ev\x00-1", "\xff\xfe"
	// Valid text, but too long for the primary key's index (a btree entry
	// holds at most 2,704 bytes; random characters do not compress).
	rnd := rand.New(rand.NewPCG(1, 2))
	var long strings.Builder
	for range 4000 {
		long.WriteByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"[rnd.IntN(64)])
	}
	on := func(p int32, key, id string, seq int) *kgo.Record {
		r := rec(key, id, seq)
		r.Topic, r.Partition = f.topic, p
		return r
	}
	recs := []*kgo.Record{
		on(0, "a", "a-1", 1), on(0, "b", "b-1", 2),
		on(0, "a", nul, 3), // bad, key a
		on(0, "a", "a-2", 4), on(0, "b", "b-2", 5),
		on(0, "b", notUTF8, 6), // bad, key b
		on(0, "a", "a-3", 7), on(0, "b", "b-3", 8),
		on(0, "c", long.String(), 9), // bad, key c
		on(0, "c", "c-1", 10),
		on(1, "d", "d-1", 11), on(1, "d", "d-2", 12),
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	var mu sync.Mutex
	handled := map[string]int{} // ids handed to the Handler
	note := func(r *kgo.Record) {
		mu.Lock()
		handled[string(header(r, "id"))]++
		mu.Unlock()
	}
	cfg := f.config(nil)
	if batch {
		cfg.BatchHandler = func(ctx context.Context, tx pgx.Tx, rs []*kgo.Record) error {
			for _, r := range rs {
				note(r)
				if err := record(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		}
	} else {
		cfg.Handler = func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			note(r)
			return record(ctx, tx, r)
		}
	}
	cfg.LeaveGroupOnStop = true
	c := start(t, cfg)
	waitFor(t, "the records after the bad ids applied", func() bool {
		return f.count(t, `SELECT count(*) FROM effects WHERE id IN ('a-3', 'b-3', 'c-1', 'd-2')`) == 4
	})
	waitFor(t, "the bad ids dead-lettered", func() bool { return c.c.Stats().DeadLettered >= 3 })
	c.Stop(t)

	// Every good record's effect once, in each key's order.
	rows, err := f.pool.Query(context.Background(), `SELECT id FROM effects ORDER BY pos`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[byte][]string{}
	for _, id := range got {
		perKey[id[0]] = append(perKey[id[0]], id)
	}
	want := map[byte][]string{'a': {"a-1", "a-2", "a-3"}, 'b': {"b-1", "b-2", "b-3"}, 'c': {"c-1"}, 'd': {"d-1", "d-2"}}
	for k, ids := range want {
		if !slices.Equal(perKey[k], ids) {
			t.Errorf("key %c: effects %q, want %q (all effects %q)", k, perKey[k], ids, got)
		}
	}
	if len(got) != 9 {
		t.Errorf("%d effects %q, want the 9 good records once each", len(got), got)
	}
	if handled[nul] != 0 || handled[notUTF8] != 0 || handled[long.String()] != 0 {
		t.Errorf("handler got the invalid ids (%v)", handled)
	}
	if s := c.c.Stats(); s.Applied != 9 || s.DeadLettered != 3 || s.Duplicates != 0 {
		t.Errorf("stats %+v, want 9 applied, 3 dead-lettered, 0 duplicates", s)
	}
	if n := f.count(t, `SELECT count(*) FROM inbox_processed`); n != 9 {
		t.Errorf("%d ids processed, want 9", n)
	}

	// The dead letters, read to the end offsets: the bad records as they
	// were, with the reason.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dls, _, err := testbed.ReadToEnd(ctx, f.b.Brokers(), []string{f.group + ".dlq"}, testbed.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dls))
	}
	slices.SortFunc(dls, func(x, y *kgo.Record) int { return bytes.Compare(x.Value, y.Value) })
	for i, bad := range []*kgo.Record{recs[2], recs[5], recs[8]} {
		d := dls[i]
		if !bytes.Equal(d.Key, bad.Key) || !bytes.Equal(d.Value, bad.Value) {
			t.Errorf("dead letter %d: key %q value %q, want %q %q", i, d.Key, d.Value, bad.Key, bad.Value)
		}
		if n := len(bad.Headers); len(d.Headers) < n || !slices.EqualFunc(d.Headers[:n], bad.Headers, func(x, y kgo.RecordHeader) bool {
			return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
		}) {
			t.Errorf("dead letter %d: headers %q, want the record's own %q first", i, d.Headers, bad.Headers)
		}
		wantHdr := map[string]string{
			HeaderErrorClass: ClassInvalidID, HeaderAttempts: "0", HeaderTopic: f.topic,
			HeaderPartition: "0", HeaderOffset: fmt.Sprint([]int{2, 5, 8}[i]), HeaderGroup: f.group,
		}
		for k, v := range wantHdr {
			if got := string(header(d, k)); got != v {
				t.Errorf("dead letter %d: header %s = %q, want %q", i, k, got, v)
			}
		}
		if msg := string(header(d, HeaderErrorMessage)); !strings.Contains(msg, "id header") {
			t.Errorf("dead letter %d: %s %q does not name the id", i, HeaderErrorMessage, msg)
		}
	}
	f.offsetsAtEnd(t, f.topic)
}
