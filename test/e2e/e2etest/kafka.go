package e2etest

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
)

// CreateTopicWithLimit creates topic with one partition and the topic
// config max.message.bytes=limit, as an operator would before walrelay runs.
func CreateTopicWithLimit(t *testing.T, e *Env, topic string, limit int) {
	t.Helper()
	adm := kadm.NewClient(MustClient(t, e))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v := fmt.Sprint(limit)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &v}, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	harness.WaitFor(t, 30*time.Second, "topic "+topic+" to have a leader", func() bool {
		tds, err := adm.ListTopics(ctx, topic)
		return err == nil && tds[topic].Err == nil && len(tds[topic].Partitions) == 1 && tds[topic].Partitions[0].Leader >= 0
	})
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
