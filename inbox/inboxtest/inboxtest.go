package inboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
)

// Env is where Run runs.
type Env struct {
	Brokers []string
	Pool    *pgxpool.Pool
	// Configure, if set, edits the Consumer's Config before it starts
	// (MaxAttempts, OnDuplicate...). Run sets Brokers, Group, Topics,
	// Pool, Handler, short retry backoffs and dynamic membership first.
	Configure func(*inbox.Config)
}

// Result is what Run saw.
type Result struct {
	Stats       inbox.Stats
	DeadLetters []*kgo.Record // in the order of the records they stand for
}

// Event returns a record of eventType with key and value, and a random id
// header (walrelay's "id"): repeat a record to deliver it twice.
func Event(eventType, key, value string) *kgo.Record {
	return &kgo.Record{Key: []byte(key), Value: []byte(value), Headers: []kgo.RecordHeader{
		{Key: "id", Value: []byte(uniq())}, {Key: "eventType", Value: []byte(eventType)},
	}}
}

// Run produces recs, in order, to a new topic of one partition, runs a
// Consumer with h until each record was applied, skipped as a duplicate or
// dead-lettered (a minute at most: then the test fails), stops it and
// returns its counters and dead letters.
func Run(t testing.TB, env Env, h inbox.Handler, recs ...*kgo.Record) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := uniq()
	topic, group := "inboxtest."+id, "inboxtest-"+id
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatalf("inboxtest: kafka client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatalf("inboxtest: create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		adm.DeleteTopics(dctx, topic, group+".dlq")
	})
	if err := inbox.CreateTable(ctx, env.Pool, ""); err != nil {
		t.Fatalf("inboxtest: %v", err)
	}
	if len(recs) > 0 {
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("inboxtest: produce: %v", err)
		}
	}
	cfg := inbox.Config{
		Brokers: env.Brokers, Group: group, Topics: []string{topic}, Pool: env.Pool, Handler: h,
		RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond,
		InstanceID: inbox.DynamicMembership,
	}
	if env.Configure != nil {
		env.Configure(&cfg)
	}
	c, err := inbox.New(cfg, nil)
	if err != nil {
		t.Fatalf("inboxtest: %v", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	finished := func() bool {
		s := c.Stats()
		return s.Applied+s.Duplicates+s.DeadLettered >= int64(len(recs))
	}
	for !finished() && ctx.Err() == nil {
		select {
		case err := <-done:
			t.Fatalf("inboxtest: Run: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("inboxtest: Run: %v", err)
	}
	res := Result{Stats: c.Stats()}
	if !finished() {
		t.Fatalf("inboxtest: %d records not handled within a minute: %+v", len(recs), res.Stats)
	}
	res.DeadLetters = readAll(t, env.Brokers, group+".dlq")
	return res
}

// readAll reads topic to its end offsets, and orders the records by their
// original offset (walrelay.original.offset: the topic Run produced to has
// one partition), whichever partition of topic they are in.
func readAll(t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("inboxtest: kafka client: %v", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("inboxtest: end offsets of %s: %v", topic, err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("inboxtest: read %s: %d of %d records within a minute", topic, len(out), end)
		}
		out = append(out, fs.Records()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return originalOffset(out[i]) < originalOffset(out[j]) })
	return out
}

func originalOffset(r *kgo.Record) int64 {
	n, _ := strconv.ParseInt(inbox.Header(r, inbox.HeaderOffset), 10, 64)
	return n
}

func uniq() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
