package kafkaconn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// These tests use kfake for the client side of topic creation only; that a
// created topic takes its first record at once is proven on a real Kafka
// (test/e2e TestCreatedTopicIsReadyBeforeItsFirstRecord).

func newClient(t *testing.T, brokers int) *kgo.Client {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestCreateTopics(t *testing.T) {
	cl := newClient(t, 3)
	ctx := t.Context()
	compact := "compact"
	created, err := CreateTopics(ctx, cl, zap.NewNop(), time.Minute,
		Topic{Name: "a", Partitions: 6, ReplicationFactor: -1},
		Topic{Name: "b", Partitions: 1, ReplicationFactor: 1, Configs: map[string]*string{"cleanup.policy": &compact}})
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 2 || created[0].Name != "a" || created[1].Name != "b" || created[0].Existed || created[1].Existed {
		t.Fatalf("created %+v, want a and b, neither existing", created)
	}
	details, err := kadm.NewClient(cl).ListTopics(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details["a"].Partitions); n != 6 {
		t.Errorf("topic a has %d partitions, want 6", n)
	}
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	policy := ""
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				policy = c.MaybeValue()
			}
		}
	}
	if policy != "compact" {
		t.Errorf("topic b has cleanup.policy=%q, want compact", policy)
	}

	// N.B. another creator first: no error, and the leaders are waited for.
	created, err = CreateTopics(ctx, cl, zap.NewNop(), time.Minute, Topic{Name: "a", Partitions: 6, ReplicationFactor: -1})
	if err != nil || len(created) != 1 || !created[0].Existed {
		t.Fatalf("creating a again: %+v, %v; want it Existed and no error", created, err)
	}
}

func TestCreateTopicsRefused(t *testing.T) {
	cl := newClient(t, 1)
	created, err := CreateTopics(t.Context(), cl, zap.NewNop(), time.Minute,
		Topic{Name: "ok", Partitions: 1, ReplicationFactor: 1},
		Topic{Name: "wide", Partitions: 1, ReplicationFactor: 3},
		Topic{Name: "never", Partitions: 1, ReplicationFactor: 1})
	var ce *CreateError
	if !errors.As(err, &ce) || ce.Topic != "wide" || !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("error %v, want a *CreateError of topic wide wrapping INVALID_REPLICATION_FACTOR", err)
	}
	if !strings.HasPrefix(err.Error(), "create topic wide: ") {
		t.Errorf("error %q, want it to start %q", err, "create topic wide: ")
	}
	if len(created) != 1 || created[0].Name != "ok" {
		t.Errorf("created %+v, want only ok (created before the refusal; never not tried)", created)
	}
}

func TestAwaitLeadersOfAMissingTopic(t *testing.T) {
	cl := newClient(t, 1)
	// N.B. long enough for a metadata answer on a busy machine: with
	// 200 ms, make test beside other suites saw the first metadata request
	// itself time out, and "metadata: context deadline exceeded" as the
	// last error.
	tries, err := AwaitLeaders(t.Context(), cl, []string{"missing"}, 3*time.Second)
	if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, errNoLeader) {
		t.Fatalf("AwaitLeaders of a missing topic: %d tries, %v; want an error naming why", tries, err)
	}
	if !strings.HasPrefix(err.Error(), "wait for the leaders of created topics: context deadline exceeded") {
		t.Errorf("error %q, want the wait's", err)
	}
}
