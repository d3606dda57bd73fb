package sink

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/kafkastate"
)

// TestCheckpointTopicCheckedOnce: the relay's marker store checks the
// checkpoint topic (kafkastate.Open); an exactly-once sink told so
// (Deps.CheckpointTopicReady) only reads its limits at Start, one
// DescribeConfigs, where one left to itself also checks its cleanup.policy
// (two) and lists it.
func TestCheckpointTopicCheckedOnce(t *testing.T) {
	for _, ready := range []bool{true, false} {
		c := newCluster(t)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		compact := "compact"
		if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{"cleanup.policy": &compact}, "walrelay.checkpoints"); err != nil {
			t.Fatal(err)
		}
		cl.Close()
		var describes atomic.Int32
		c.ControlKey(int16(kmsg.DescribeConfigs), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			for _, r := range kreq.(*kmsg.DescribeConfigsRequest).Resources {
				if r.ResourceName == "walrelay.checkpoints" {
					describes.Add(1)
				}
			}
			return nil, nil, false
		})
		newSink(t, c, OnPoisonDeadLetter, 10*time.Second, func(cfg *sinkSetup) {
			cfg.ExactlyOnce = true
			cfg.Source = kafkastate.Source{Slot: "s1", Database: "db", SystemID: "1"}
			cfg.CheckpointTopicReady = ready
		})
		want := int32(1)
		if !ready {
			want = 2
		}
		if got := describes.Load(); got != want {
			t.Errorf("ready %v: the checkpoint topic's configs described %d times at Start, want %d", ready, got, want)
		}
	}
}
