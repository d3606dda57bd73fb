package e2etest

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// CreateTopicWithLimit creates topic with one partition and the topic
// config max.message.bytes=limit, as an operator would before walrelay runs.
func CreateTopicWithLimit(t *testing.T, e *Env, topic string, limit int) {
	t.Helper()
	e.Bed.CreateTopicWith(t, topic, 1, map[string]string{"max.message.bytes": fmt.Sprint(limit)})
}

// DLQCollector reads the dead-letter topic dlq (that name alone).
func (e *Env) DLQCollector(t *testing.T, dlq string) *Collector {
	t.Helper()
	return e.CollectRE(t, "^"+regexp.QuoteMeta(dlq)+"$")
}

// MustClient is a franz-go client of the bed's brokers, closed at the end of the
// test.
func MustClient(t *testing.T, e *Env) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Ptr is a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// Keys lists the keys of m.
func Keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// LooseOutbox is an outbox without NOT NULL or key constraints, so that a
// test can commit the rows a careless application would.
const LooseOutbox = `
DROP TABLE outbox;
CREATE TABLE outbox (id text, aggregatetype text, aggregateid text, type text, payload jsonb);`

// OpenTransaction begins a Kafka transaction of a producer of
// transactional id id and writes one record to topic in it, as another
// pipeline sharing the topic has one open from its checkpoint record until
// the broker wrote its commit's markers (or a walrelay killed inside one,
// with its own id): the partition's last stable offset stays below that
// record until abort ends the transaction, or a newer producer of id fences
// it. The transaction times out after five minutes.
func OpenTransaction(t *testing.T, e *Env, id, topic string) (abort func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bed.Brokers()...), kgo.TransactionalID(id),
		kgo.TransactionTimeout(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("eos/other/other/other"), Value: []byte(`{}`)}).FirstErr(); err != nil {
		t.Fatalf("produce to %s in a transaction: %v", topic, err)
	}
	return func() {
		t.Helper()
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatalf("abort the other producer's transaction on %s: %v", topic, err)
		}
	}
}
