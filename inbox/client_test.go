package inbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestAssignedBeforeRunStoresTheClient: kgo starts the group in
// NewClient and calls the group callbacks from its own goroutines, so
// the first assignment can come before the goroutine that created the
// client has stored it (a CI run of make test panicked so: a nil client
// in onAssigned's log fields). Here NewClient returns only once the
// assignment was logged; the Consumer must log it with its member id and
// generation, then apply a record.
func TestAssignedBeforeRunStoresTheClient(t *testing.T) {
	f := newFixture(t, 2)
	core, logs := observer.New(zap.InfoLevel)
	c, err := New(f.config(record), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	assigned := func() []observer.LoggedEntry { return logs.FilterMessage("partitions assigned").All() }
	c.newClient = func(opts ...kgo.Opt) (*kgo.Client, error) {
		cl, err := kgo.NewClient(opts...)
		deadline := time.Now().Add(time.Minute)
		for err == nil && len(assigned()) == 0 {
			if time.Now().After(deadline) {
				t.Error("no partitions assigned within a minute of the client's creation")
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return cl, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}()
	f.produce(t, rec("a", "id-1", 1))
	waitFor(t, "the record applied", func() bool { return c.Stats().Applied == 1 })
	es := assigned()
	if len(es) == 0 {
		t.Fatal("no \"partitions assigned\" line")
	}
	m := es[0].ContextMap()
	if id, _ := m["member_id"].(string); id == "" {
		t.Errorf("partitions assigned with member_id %q, want the broker's member id (fields %v)", id, m)
	}
	if gen, _ := m["generation"].(int32); gen < 1 {
		t.Errorf("partitions assigned with generation %v, want 1 or more (fields %v)", m["generation"], m)
	}
	if ps, _ := m["partitions"].([]interface{}); len(ps) != 2 {
		t.Errorf("partitions assigned: %v, want the topic's 2", m["partitions"])
	}
}

// TestNewJoinsNothing: a Consumer made with New and not run takes no
// part in its group (Run joins it), so the group's running member gets
// every partition and applies every record.
func TestNewJoinsNothing(t *testing.T) {
	f := newFixture(t, 4)
	var recs []*kgo.Record
	for i := range 40 { // 40 keys: every partition gets some
		recs = append(recs, rec(fmt.Sprintf("k%d", i), fmt.Sprintf("id-%d", i), i))
	}
	f.produce(t, recs...)
	idleCfg := f.config(record)
	idleCfg.InstanceID = "idle-" + uniq()
	idle, err := New(idleCfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if idle.cl != nil {
			idle.cl.Close()
		}
	})
	cfg := f.config(record)
	cfg.InstanceID = "running-" + uniq()
	r := start(t, cfg)
	deadline := time.Now().Add(time.Minute)
	for r.c.Stats().Applied < int64(len(recs)) {
		if time.Now().After(deadline) {
			t.Fatalf("the running member applied %d of %d records in a minute; the group's members: %s", r.c.Stats().Applied, len(recs), f.members(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := f.members(t); got != cfg.InstanceID {
		t.Errorf("the group's members: %s, want only %s", got, cfg.InstanceID)
	}
}

// members lists the group's members by instance id (or member id).
func (f *fixture) members(t *testing.T) string {
	t.Helper()
	g, err := f.describeGroup(t)
	if err != nil {
		return err.Error()
	}
	var ms []string
	for _, m := range g.Members {
		id := m.MemberID
		if m.InstanceID != nil {
			id = *m.InstanceID
		}
		ms = append(ms, id)
	}
	return strings.Join(ms, ",")
}
