package inbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFencedMemberStops: another process joins the group with this
// member's instance id (a plain client here): the member is fenced, and
// its Run returns an error that names the instance id and the fix instead
// of fighting the other for the id.
func TestFencedMemberStops(t *testing.T) {
	f := newFixture(t, 2)
	f.produce(t, rec("a", "id-1", 1))
	cfg := f.config(record)
	cfg.InstanceID = "shared-" + uniq()
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "the member to apply a record", func() bool { return c.Stats().Applied == 1 })

	other, err := kgo.NewClient(kgo.SeedBrokers(f.b.Brokers()...), kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(f.topic),
		kgo.InstanceID(cfg.InstanceID), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for ctx.Err() == nil {
			if other.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, kerr.FencedInstanceID) || !strings.Contains(err.Error(), cfg.InstanceID) {
			t.Errorf("Run returned %v, want fenced, naming the instance id", err)
		}
		t.Logf("Run: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the fenced member's Run did not return within 2 minutes")
	}
}
