package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/testbed"
)

// TestCollectorSeesATopicCreatedAfterItsLastListing: the end-to-end tests'
// Collector lists its topics, then a topic matching it is created and
// written (as walrelay does at start), and the next ToEnd must return its
// records. A make test's TestBackfillOrdersATransactionsRowsAsInserted read
// back 0 of 10 acknowledged records: franz-go answered ToEnd's listing of
// every topic from the metadata the consumer had cached before walrelay
// created its topic (younger than kgo.MetadataMinAge, 250 ms for the
// Collector), so ToEnd found no topic and returned at once. Here the
// Collector's client keeps its metadata 10 s, so that the window is not a
// matter of timing.
func TestCollectorSeesATopicCreatedAfterItsLastListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.KafkaOpts = []kgo.Opt{kgo.MetadataMinAge(10 * time.Second), kgo.MetadataMaxAge(10 * time.Second)}
	c := e.Collect(t)
	if recs := c.ToEnd(); len(recs) != 0 {
		t.Fatalf("ToEnd before any topic: %d records, want none", len(recs))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := e.Topics()[0]
	if err := testbed.CreateTopics(t.Context(), cl, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if recs := c.ToEnd(); len(recs) != n {
		t.Fatalf("ToEnd after %d records were acknowledged in a new topic: %d records, want %d", n, len(recs), n)
	}
}
