package kafkastate

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
)

// fakeKafka is a one-broker kfake cluster (client error paths only),
// closed when the test ends.
func fakeKafka(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// openStore opens a marker store on c's topic "cp", created at open,
// closed when the test ends.
func openStore(ctx context.Context, t *testing.T, c *kfake.Cluster) *Store {
	t.Helper()
	s, err := Open(ctx, Config{Brokers: c.ListenAddrs(), Topic: "cp", CreateTopic: true, ReplicationFactor: -1, Version: "test"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
