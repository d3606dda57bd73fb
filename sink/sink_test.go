package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
)

// These tests use kfake for the Kafka client's error paths only; what the
// sink writes to a real broker is proven in test/e2e.

const start = pglogrepl.LSN(0x1000)

// sinkSetup is what newSink's options change: the settings and the
// collaborators.
type sinkSetup struct {
	Config
	Deps
}

func newSink(t *testing.T, c *kfake.Cluster, onPoison string, timeout time.Duration, opts ...func(*sinkSetup)) (*Sink, *checkpoint.Tracker) {
	t.Helper()
	tr := checkpoint.New(start)
	cfg := sinkSetup{Config: Config{
		Brokers:         c.ListenAddrs(),
		CreateTopics:    true,
		TopicPartitions: 2,
		OnPoison:        onPoison,
		DeliveryTimeout: timeout,
		MaxMessageBytes: 10000,
	}, Deps: Deps{Tracker: tr}}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg.Config, cfg.Deps, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, tr
}

func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func tx(xid uint32, end pglogrepl.LSN, events ...decode.Event) *decode.Tx {
	return &decode.Tx{Xid: xid, CommitLSN: end - 8, EndLSN: end, CommitTime: time.Unix(1700000000, 0), Events: events, First: true, Last: true}
}

func event(topic, key, id string) decode.Event {
	return decode.Event{Table: "public.outbox", Topic: topic, Key: []byte(key), ID: []byte(id), Value: []byte(`{"k":"` + key + `"}`)}
}

// exactEvent is event with slices whose capacity is their length, so that
// what a record counts against MaxInflightBytes can be worked out from the
// strings alone.
func exactEvent(topic, key, id string) decode.Event {
	ev := event(topic, key, id)
	ev.Key, ev.ID, ev.Value = ev.Key[:len(ev.Key):len(ev.Key)], ev.ID[:len(ev.ID):len(ev.ID)], ev.Value[:len(ev.Value):len(ev.Value)]
	return ev
}

func readAll(t *testing.T, c *kfake.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for (n < 0 || len(recs) < n) && ctx.Err() == nil {
		if n < 0 {
			// n < 0: everything the topic holds.
			ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			n = 0
			ends.Each(func(o kadm.ListedOffset) { n += int(o.Offset) })
			continue
		}
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	if len(recs) != n {
		t.Fatalf("read %d records from %s, want %d", len(recs), topic, n)
	}
	return recs
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func TestAcknowledgedTransactionsAdvanceTheWatermark(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if err := s.Produce(ctx, tx(uint32(i), start+pglogrepl.LSN(i*100), event("orders", fmt.Sprint("k", i), fmt.Sprint("id", i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tr.Watermark(); got != start+300 {
		t.Errorf("watermark %s, want %s", got, start+300)
	}
	if n := s.InflightBytes(); n != 0 {
		t.Errorf("%d in-flight bytes after every record was acknowledged", n)
	}
	recs := readAll(t, c, "orders", 3)
	if header(recs[0], "id") == "" || !recs[0].Timestamp.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("record %+v: want an id header and the commit time", recs[0])
	}
}

// rejectTopic creates topic and makes every produce request to it fail
// with code. Produce v13 names topics by id, so both are matched.
func rejectTopic(t *testing.T, c *kfake.Cluster, topic string, code int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 2, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte(resp.ID)
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		hit := false
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			match := rt.Topic == topic || rt.TopicID == id
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				if match {
					sp.ErrorCode = code
					hit = true
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, hit
	})
}

// rejectKey makes the broker reject every produce batch of topic that
// holds key (records are uncompressed), as Kafka rejects a whole batch for
// one record it refuses; other batches are written.
func rejectKey(t *testing.T, c *kfake.Cluster, topic string, key []byte, code int16) {
	t.Helper()
	rejectBatches(t, c, topic, code, func(records []byte) bool { return bytes.Contains(records, key) })
}

// rejectBatches creates topic and makes the broker answer code to every
// produce request with a batch of topic that reject picks (by its raw
// records); other requests are written.
func rejectBatches(t *testing.T, c *kfake.Cluster, topic string, code int16, reject func(records []byte) bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte(resp.ID)
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		hit := false
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				hit = hit || (rt.Topic == topic || rt.TopicID == id) && reject(rp.Records)
			}
		}
		if !hit {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				// N.B. the whole request fails, so that no batch is
				// written twice under one sequence.
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

func waitFailed(t *testing.T, s *Sink) error {
	t.Helper()
	select {
	case <-s.Failed():
		return s.Err()
	case <-time.After(20 * time.Second):
		t.Fatal("the sink did not fail")
		return nil
	}
}

// TestBatchRejectionIsolatesTheRecordAtFault: the broker rejects each
// batch holding one bad record. Nothing is dead-lettered and nothing
// confirmed past it by the sink that saw the batch fail; the next sink,
// given the same Isolation (as the relay restarts from the confirmed
// position), produces that topic's records one at a time and dead-letters
// only the bad one; the others arrive, and a later transaction ends the
// isolation.
func TestBatchRejectionIsolatesTheRecordAtFault(t *testing.T) {
	for _, code := range []int16{kerr.InvalidRecord.Code, kerr.CorruptMessage.Code, kerr.MessageTooLarge.Code, kerr.InvalidTimestamp.Code, kerr.RecordListTooLarge.Code} {
		t.Run(kerr.ErrorForCode(code).Error()[:16], func(t *testing.T) {
			c := newCluster(t)
			rejectKey(t, c, "strict", []byte("bad-key"), code)
			iso := NewIsolation()
			none := func(cfg *sinkSetup) { cfg.Compression = "none"; cfg.Isolation = iso }
			txs := []*decode.Tx{
				tx(1, start+100, event("strict", "k1", "id1"), event("strict", "k1", "id2")),
				tx(2, start+200, event("strict", "k1", "id3"), event("strict", "bad-key", "id-bad"), event("strict", "k1", "id4")),
				tx(3, start+300, event("strict", "k1", "id5")),
			}
			if code == kerr.InvalidTimestamp.Code {
				// N.B. a timestamp of the event's own, which may be at
				// fault (stamp_test.go: one walrelay gave is not).
				for _, x := range txs {
					for i := range x.Events {
						x.Events[i].Timestamp = time.UnixMilli(1800000000000)
					}
				}
			}
			s1, tr1 := newSink(t, c, OnPoisonDeadLetter, time.Minute, none)
			for _, x := range txs {
				if err := s1.Produce(context.Background(), x); err != nil && !errors.Is(err, ErrBatchRejected) {
					t.Fatal(err)
				}
			}
			err := waitFailed(t, s1)
			if !errors.Is(err, ErrBatchRejected) || errors.Is(err, ErrPoison) {
				t.Fatalf("first sink: %v, want ErrBatchRejected", err)
			}
			confirmed := tr1.Watermark()
			if confirmed >= start+200 {
				t.Fatalf("watermark %s passed the rejected transaction", confirmed)
			}
			if !iso.Active() {
				t.Fatal("the rejection did not start an isolation")
			}
			s1.Close()

			// The relay's next attempt: from the confirmed position.
			tr2 := checkpoint.New(confirmed)
			cfg := sinkSetup{Config: Config{Brokers: c.ListenAddrs(), CreateTopics: true, TopicPartitions: 1, DeliveryTimeout: time.Minute, MaxMessageBytes: 10000}, Deps: Deps{Tracker: tr2}}
			none(&cfg)
			s2, err := New(cfg.Config, cfg.Deps, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			ctx := context.Background()
			if err := s2.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for _, x := range append(txs, tx(4, start+400, event("strict", "k1", "id6"))) {
				if x.EndLSN <= confirmed {
					continue
				}
				if err := s2.Produce(ctx, x); err != nil {
					t.Fatal(err)
				}
			}
			if err := s2.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := tr2.Watermark(); got != start+400 {
				t.Errorf("watermark %s, want %s", got, start+400)
			}
			if iso.Active() {
				t.Errorf("isolation still active after a transaction past it")
			}
			ids := map[string]bool{}
			for _, r := range readAll(t, c, "strict", -1) {
				ids[header(r, "id")] = true
			}
			for _, id := range []string{"id1", "id2", "id3", "id4", "id5", "id6"} {
				if !ids[id] {
					t.Errorf("record %s missing from the topic (have %v)", id, ids)
				}
			}
			if ids["id-bad"] {
				t.Errorf("the rejected record is in the topic")
			}
			dead := readAll(t, c, "walrelay.dlq", 1)
			if got := header(dead[0], HeaderEventID); got != "id-bad" {
				t.Errorf("dead-lettered %q, want only id-bad", got)
			}
			if got := header(dead[0], HeaderTopic); got != "strict" {
				t.Errorf("original topic %q", got)
			}
		})
	}
}

func TestHaltOnARejectedRecordKeepsTheWatermark(t *testing.T) {
	c := newCluster(t)
	rejectTopic(t, c, "strict", kerr.InvalidRecord.Code)
	iso := NewIsolation()
	ctx := context.Background()
	s1, tr := newSink(t, c, OnPoisonHalt, time.Minute, func(cfg *sinkSetup) { cfg.Isolation = iso })
	if err := s1.Produce(ctx, tx(1, start+100, event("strict", "k", "id"))); err != nil {
		t.Fatal(err)
	}
	if err := waitFailed(t, s1); !errors.Is(err, ErrBatchRejected) {
		t.Fatalf("first sink: %v, want ErrBatchRejected", err)
	}
	s2, tr2 := newSink(t, c, OnPoisonHalt, time.Minute, func(cfg *sinkSetup) { cfg.Isolation = iso })
	err := s2.Produce(ctx, tx(1, start+100, event("strict", "k", "id")))
	if !errors.Is(err, ErrPoison) || !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("isolating sink: %v, want ErrPoison wrapping INVALID_RECORD", err)
	}
	if tr.Watermark() != start || tr2.Watermark() != start {
		t.Errorf("watermark moved past the rejected record")
	}
}

// TestTopicLimitCapsBatches: a topic whose max.message.bytes (6000) is
// below the batch size: every record that fits on its own arrives, in
// order; only the one larger than the topic's limit is dead-lettered.
func TestTopicLimitCapsBatches(t *testing.T) {
	c := newCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	limit := "6000"
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &limit}, "small"); err != nil {
		t.Fatal(err)
	}
	s, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute, func(cfg *sinkSetup) {
		cfg.Compression = "none"
		cfg.MaxMessageBytes = 1 << 20
		cfg.MaxInflightBytes = 64 << 20
	})
	var evs []decode.Event
	for i := range 40 {
		ev := event("small", "k", fmt.Sprint("id", i))
		ev.Value = []byte(fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, i, strings.Repeat("p", 500)))
		evs = append(evs, ev)
		if i == 20 {
			big := event("small", "k", "id-big")
			big.Value = []byte(strings.Repeat("b", 7000))
			evs = append(evs, big)
		}
	}
	ctx := context.Background()
	if err := s.Produce(ctx, tx(1, start+100, evs...)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tr.Watermark(); got != start+100 {
		t.Errorf("watermark %s, want %s", got, start+100)
	}
	for i, r := range readAll(t, c, "small", 40) {
		if want := fmt.Sprint("id", i); header(r, "id") != want {
			t.Errorf("record %d: id %s, want %s", i, header(r, "id"), want)
		}
	}
	d := readAll(t, c, "walrelay.dlq", 1)[0]
	// N.B. the record as it was: walrelay dlq redrive re-publishes it.
	if header(d, HeaderEventID) != "id-big" || header(d, HeaderErrorClass) != "too_large" || header(d, HeaderTopic) != "small" ||
		header(d, HeaderOriginalHeaders) == "" || string(d.Value) != strings.Repeat("b", 7000) || header(d, HeaderDropped) != "" {
		t.Errorf("dead-letter record headers %v", d.Headers)
	}
}

// TestDeliveryTimeoutTimesRecordsNotTransactions: a transaction whose
// parts arrive over three delivery timeouts, each part acknowledged at
// once, completes; so does the wait between its parts.
func TestDeliveryTimeoutTimesRecordsNotTransactions(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, time.Second)
	ctx := context.Background()
	const parts = 12
	for i := range parts {
		part := tx(1, start+100, event("orders", "k", fmt.Sprint("id", i)))
		part.First, part.Last = i == 0, i == parts-1
		if err := s.Produce(ctx, part); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tr.Watermark(); got != start+100 {
		t.Errorf("watermark %s, want %s", got, start+100)
	}
}

func TestRetriableErrorsUntilTheDeliveryTimeoutFailTheSink(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, 2*time.Second)
	rejectTopic(t, c, "slow", kerr.NotEnoughReplicas.Code)
	ctx := context.Background()
	if err := s.Produce(ctx, tx(1, start+100, event("slow", "k", "id"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("the sink did not fail after the delivery timeout")
	}
	if errors.Is(s.Err(), ErrPoison) {
		t.Errorf("a retriable error was treated as poison: %v", s.Err())
	}
	if got := tr.Watermark(); got != start {
		t.Errorf("watermark %s moved past a failed record", got)
	}
}

func TestPoisonEventIsDeadLetteredWithItsRow(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute)
	poison := decode.Event{
		Table:  "public.outbox",
		ID:     []byte("id-p"),
		Err:    fmt.Errorf("%w: column %q is NULL", decode.ErrNullKey, "aggregateid"),
		Reason: "null_key",
		Row: []decode.Field{
			{Name: "id", Type: 25, Value: []byte("id-p")},
			{Name: "aggregateid", Type: 25, Null: true},
			{Name: "payload", Type: 3802, Value: []byte(`{"a": 1}`)},
		},
	}
	ctx := context.Background()
	if err := s.Produce(ctx, tx(7, start+100, event("good", "k", "id1"), poison, event("good", "k", "id2"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tr.Watermark(); got != start+100 {
		t.Errorf("watermark %s, want %s", got, start+100)
	}
	readAll(t, c, "good", 2)
	d := readAll(t, c, "walrelay.dlq", 1)[0]
	if got := string(d.Value); got != `{"aggregateid":null,"id":"id-p","payload":{"a":1}}` {
		t.Errorf("value %s", got)
	}
	for k, want := range map[string]string{HeaderErrorClass: "null_key", HeaderTable: "public.outbox", HeaderXid: "7", HeaderEventID: "id-p", HeaderCommitLSN: (start + 92).String()} {
		if got := header(d, k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}

func TestHaltOnAPoisonEvent(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonHalt, time.Minute)
	poison := decode.Event{Table: "public.outbox", Err: fmt.Errorf("%w: x", decode.ErrNullID), Reason: "null_id"}
	err := s.Produce(context.Background(), tx(1, start+100, poison))
	if !errors.Is(err, ErrPoison) || !errors.Is(err, decode.ErrNullID) {
		t.Errorf("error %v, want ErrPoison wrapping ErrNullID", err)
	}
	if got := tr.Watermark(); got != start {
		t.Errorf("watermark %s moved", got)
	}
}

// TestInflightBytesBoundProduce: records count their overhead against
// MaxInflightBytes; Produce blocks while the budget is used up and returns
// the sink's failure instead of hanging.
func TestInflightBytesBoundProduce(t *testing.T) {
	c := newCluster(t)
	const limit = 10000
	s, tr := newSink(t, c, OnPoisonDeadLetter, 3*time.Second, func(cfg *sinkSetup) { cfg.MaxInflightBytes = limit })
	rejectTopic(t, c, "stuck", kerr.NotEnoughReplicas.Code)
	produced := make(chan int, 100)
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= 30; i++ {
			if err := s.Produce(context.Background(), tx(uint32(i), start+pglogrepl.LSN(i*100), exactEvent("stuck", "k", fmt.Sprint("id", i)))); err != nil {
				done <- err
				return
			}
			produced <- i
		}
		done <- nil
	}()
	// Each record costs RecordOverhead (1024) + key "k" (1) + value
	// {"k":"k"} (9) + header "id" (2) + its id: "id1".."id9" (3), so
	// 1039 bytes; nine take 9351 of the 10000 and the tenth ("id10", 1040
	// bytes) does not fit.
	const want, perRecord = 9, 1039
	// Produce fills the budget, then blocks until the delivery timeout
	// fails the sink.
	err := <-done
	if err == nil || !errors.Is(err, s.Err()) {
		t.Fatalf("Produce returned %v, want the sink's failure (%v)", err, s.Err())
	}
	n := len(produced)
	if n != want {
		t.Errorf("%d records produced before Produce blocked, want %d (limit %d, %d bytes each)", n, want, limit, perRecord)
	}
	if got := tr.Watermark(); got != start {
		t.Errorf("watermark %s moved past unacknowledged records", got)
	}
}

func TestLingerConfig(t *testing.T) {
	for _, c := range []struct {
		linger, timeout time.Duration
		ok              bool
	}{
		{0, 0, true},
		{5 * time.Millisecond, 0, true},
		{time.Minute, 0, true},
		{time.Minute + time.Millisecond, 0, false}, // franz-go's bound
		{-time.Millisecond, 0, false},
		{2 * time.Second, 2 * time.Second, false}, // as long as the delivery timeout
	} {
		err := Config{Linger: c.linger, DeliveryTimeout: c.timeout}.Validate()
		if got := err == nil; got != c.ok {
			t.Errorf("linger %s, delivery timeout %s: Validate = %v, want valid=%v", c.linger, c.timeout, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "linger") {
			t.Errorf("linger %s: %v does not name the linger", c.linger, err)
		}
	}
}

// waitWatermark waits up to 20 s for tr's watermark to reach want.
func waitWatermark(t *testing.T, tr *checkpoint.Tracker, want pglogrepl.LSN, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for tr.Watermark() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: watermark %s after 20s, want %s", what, tr.Watermark(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lingeringSink is a sink with a linger of a minute whose topic "orders"
// holds its first record (which goes at once, its partitions not yet
// loaded) at start+100.
func lingeringSink(t *testing.T) (*kfake.Cluster, *Sink, *checkpoint.Tracker) {
	t.Helper()
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, 2*time.Minute, func(cfg *sinkSetup) { cfg.Linger = time.Minute })
	if err := s.Produce(context.Background(), tx(1, start+100, event("orders", "k0", "id0"))); err != nil {
		t.Fatal(err)
	}
	waitWatermark(t, tr, start+100, "the topic's first record")
	return c, s, tr
}

// TestSendLingersOnlyABusyStream: with a linger of a minute, Send sends a
// record of a quiet stream at once, and leaves the records of ten
// transactions produced within the linger to linger; the topic's first
// record goes at once whatever the rate.
func TestSendLingersOnlyABusyStream(t *testing.T) {
	c, s, tr := lingeringSink(t)
	ctx := context.Background()
	if err := s.Produce(ctx, tx(2, start+200, event("orders", "k1", "id1"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := tr.Watermark(); got != start+100 {
		t.Fatalf("watermark %s before Send, want %s: the record did not linger, so the test proves nothing", got, start+100)
	}
	s.Send()
	waitWatermark(t, tr, start+200, "a quiet stream's record after Send")
	for i := 3; i <= 12; i++ {
		if err := s.Produce(ctx, tx(uint32(i), start+pglogrepl.LSN(i*100), event("orders", fmt.Sprint("k", i), fmt.Sprint("id", i)))); err != nil {
			t.Fatal(err)
		}
	}
	s.Send()
	time.Sleep(200 * time.Millisecond)
	if got := tr.Watermark(); got != start+200 {
		t.Errorf("watermark %s after Send with 12 transactions within the linger, want %s: a busy stream's records did not linger", got, start+200)
	}
	s.sendLingering()
	waitWatermark(t, tr, start+1200, "the busy stream's records after sendLingering")
	readAll(t, c, "orders", 12)
}

// TestSendLingeringSendsAtOnce: with a linger of a minute, a record waits
// for it until sendLingering sends it, each time.
func TestSendLingeringSendsAtOnce(t *testing.T) {
	c, s, tr := lingeringSink(t)
	ctx := context.Background()
	for i := 2; i <= 4; i++ {
		end := start + pglogrepl.LSN(i*100)
		if err := s.Produce(ctx, tx(uint32(i), end, event("orders", fmt.Sprint("k", i), fmt.Sprint("id", i)))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if got := tr.Watermark(); got != end-100 {
			t.Fatalf("record %d: watermark %s before sendLingering, want %s: the record did not linger, so the test proves nothing", i, got, end-100)
		}
		s.sendLingering()
		waitWatermark(t, tr, end, fmt.Sprintf("record %d after sendLingering", i))
	}
	readAll(t, c, "orders", 4)
}

// TestAbortFailsFlushAsACancel: an abort (the relay's stop ran out of
// time) ends a flush waiting for a Kafka that does not answer, confirms
// nothing, and reads as a cancel, so a stop that was asked for exits 0.
func TestAbortFailsFlushAsACancel(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute)
	rejectTopic(t, c, "silent", kerr.NotEnoughReplicas.Code)
	if err := s.Produce(context.Background(), tx(1, start+100, event("silent", "k", "id"))); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush(context.Background()) }()
	s.Abort()
	select {
	case err := <-flushed:
		if !errors.Is(err, ErrAborted) || !errors.Is(err, context.Canceled) {
			t.Errorf("flush after an abort: %v, want ErrAborted, a context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("flush still waiting 30 s after the abort")
	}
	if !errors.Is(s.Err(), context.Canceled) {
		t.Errorf("sink error %v is not a context.Canceled", s.Err())
	}
	if got := tr.Watermark(); got != start {
		t.Errorf("watermark %s moved after an abort", got)
	}
}
