package e2etest

import (
	"fmt"
	"regexp"
	"testing"

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
