package sink

import (
	"context"
	"errors"
	"fmt"
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

func newSink(t *testing.T, c *kfake.Cluster, onPoison string, timeout time.Duration, opts ...func(*Config)) (*Sink, *checkpoint.Tracker) {
	t.Helper()
	tr := checkpoint.New(start)
	cfg := Config{
		Brokers:         c.ListenAddrs(),
		CreateTopics:    true,
		TopicPartitions: 2,
		OnPoison:        onPoison,
		DeliveryTimeout: timeout,
		MaxMessageBytes: 10000,
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg, tr, zap.NewNop())
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
	for len(recs) < n && ctx.Err() == nil {
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

func TestRecordRejectedByTheBrokerIsDeadLettered(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute)
	ctx := context.Background()
	if err := s.Produce(ctx, tx(1, start+100, event("good", "k1", "id1"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rejectTopic(t, c, "strict", kerr.InvalidRecord.Code)
	if err := s.Produce(ctx, tx(2, start+200, event("strict", "k2", "id2"))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tr.Watermark() != start+200 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := tr.Watermark(); got != start+200 {
		t.Fatalf("watermark %s, want %s once the rejected record is dead-lettered", got, start+200)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("sink failed: %v", err)
	}
	d := readAll(t, c, "walrelay.dlq", 1)[0]
	if got := header(d, HeaderErrorClass); got != "rejected_by_broker" {
		t.Errorf("class %q", got)
	}
	if got := header(d, HeaderTopic); got != "strict" {
		t.Errorf("original topic %q", got)
	}
	if got := header(d, HeaderEventID); got != "id2" {
		t.Errorf("event id %q", got)
	}
	if got := header(d, HeaderXid); got != "2" {
		t.Errorf("xid %q", got)
	}
}

func TestHaltOnARejectedRecordKeepsTheWatermark(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonHalt, time.Minute)
	rejectTopic(t, c, "strict", kerr.InvalidRecord.Code)
	ctx := context.Background()
	if err := s.Produce(ctx, tx(1, start+100, event("strict", "k", "id"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the sink did not fail")
	}
	if !errors.Is(s.Err(), ErrPoison) {
		t.Errorf("error %v, want ErrPoison", s.Err())
	}
	if got := tr.Watermark(); got != start {
		t.Errorf("watermark %s moved past the rejected record", got)
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
		Table: "public.outbox",
		ID:    []byte("id-p"),
		Err:   fmt.Errorf("%w: column %q is NULL", decode.ErrNullKey, "aggregateid"),
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
	poison := decode.Event{Table: "public.outbox", Err: fmt.Errorf("%w: x", decode.ErrNullID)}
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
	s, tr := newSink(t, c, OnPoisonDeadLetter, 3*time.Second, func(cfg *Config) { cfg.MaxInflightBytes = limit })
	rejectTopic(t, c, "stuck", kerr.NotEnoughReplicas.Code)
	produced := make(chan int, 100)
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= 30; i++ {
			if err := s.Produce(context.Background(), tx(uint32(i), start+pglogrepl.LSN(i*100), event("stuck", "k", fmt.Sprint("id", i)))); err != nil {
				done <- err
				return
			}
			produced <- i
		}
		done <- nil
	}()
	perRecord := recordCost(&kgo.Record{Key: []byte("k"), Value: []byte(`{"k":"k"}`), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("id10")}}})
	want := int(limit / perRecord)
	// Produce fills the budget, then blocks until the delivery timeout
	// fails the sink.
	err := <-done
	if err == nil || !errors.Is(err, s.Err()) {
		t.Fatalf("Produce returned %v, want the sink's failure (%v)", err, s.Err())
	}
	n := len(produced)
	if n < want-1 || n > want {
		t.Errorf("%d records produced before Produce blocked, want %d (limit %d, %d bytes each)", n, want, limit, perRecord)
	}
	if got := tr.Watermark(); got != start {
		t.Errorf("watermark %s moved past unacknowledged records", got)
	}
}
