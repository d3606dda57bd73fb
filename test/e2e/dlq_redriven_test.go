package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestDLQRedriveRecordsFollowTheTopic: the state topic's record of a dead
// letter re-published by redrive --offset names its event. The operator
// deletes the dead-letter topic; walrelay makes it anew, and a new event
// of the same aggregate is dead-lettered at the same partition and offset
// as the re-published one: redrive --offset re-publishes it (before, it
// was left out as "re-published already", and never reached its topic).
// Then the dead letter passes the topic's retention (its records deleted
// up to after it): redrive forgets its record (a tombstone on the state
// topic, for compaction), instead of keeping it for ever.
func TestDLQRedriveRecordsFollowTheTopic(t *testing.T) {
	t.Parallel()
	b := newParkBed(t, 0)
	c := b.e.Collect(t)
	relay := b.e.Start(t, "--dlq-topic", b.dlq, "--checkpoint-topic", b.state)
	relay.WaitStreaming()
	b.write(t, 3, 2)
	b.waitConfirmed(t)
	first := b.deadLetters(t)
	if len(first) != 1 {
		t.Fatalf("%d dead letters, want 1: %v", len(first), first)
	}
	b.raiseLimit(t)
	if code, out := b.runDLQ(t, "redrive", "--offset", first[0].at); code != 0 || !strings.Contains(out, "re-published 1 dead letters") {
		t.Fatalf("dlq redrive --offset %s: exit %d:\n%s", first[0].at, code, out)
	}

	// The dead-letter topic deleted and made anew by walrelay's next start.
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	b.e.Bed.DeleteTopics(t, b.dlq)
	b.setLimit(t, fmt.Sprint(parkLimit))
	relay = b.e.Start(t, "--dlq-topic", b.dlq, "--checkpoint-topic", b.state)
	relay.WaitStreaming()
	b.write(t, 2, 1)
	b.waitConfirmed(t)
	second := b.deadLetters(t)
	if len(second) != 1 || second[0].at != first[0].at || second[0].id == first[0].id {
		t.Fatalf("dead letters of the new topic %v, want one of another event at %s, where the first was", second, first[0].at)
	}
	b.raiseLimit(t)
	code, out := b.runDLQ(t, "redrive", "--offset", second[0].at)
	if code != 0 || !strings.Contains(out, "re-published 1 dead letters") {
		t.Errorf("dlq redrive --offset %s of the new topic's dead letter: exit %d, want it re-published:\n%s", second[0].at, code, out)
	}
	held := map[string]bool{}
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		held[id] = true
	}
	for _, l := range append(first, second...) {
		if !held[l.id] {
			t.Errorf("event %s (dead letter at %s) is not in %s after its redrive", l.id, l.at, b.topic)
		}
	}

	// Past the topic's retention: its records deleted up to after it.
	adm := kadm.NewClient(e2etest.MustClient(t, b.e))
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: b.dlq, Partition: second[0].partition, At: second[0].offset + 1})
	rs, err := adm.DeleteRecords(context.Background(), del)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatalf("delete the dead-letter topic's records up to %s: %v", second[0].at, err)
	}
	code, out = b.runDLQ(t, "redrive", "--reason", "too_large")
	if code != 0 || !strings.Contains(out, "forgot 1 records of re-published dead letters that "+b.dlq+" no longer holds") {
		t.Errorf("dlq redrive after the retention: exit %d, want it to forget the record:\n%s", code, out)
	}
	key := kafkastate.RedrivenKey(b.dlq, second[0].partition, second[0].offset)
	var last []byte
	found := false
	for _, r := range b.e.Bed.ConsumeAll(t, []string{b.state}, time.Second) {
		if string(r.Key) == key {
			last, found = r.Value, true
		}
	}
	if !found || last != nil {
		t.Errorf("the state topic's last record of %s: %q (found %v), want a tombstone", key, last, found)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// letter is a dead letter: where, and of which event.
type letter struct {
	at        string // partition:offset
	partition int32
	offset    int64
	id        string
}

// deadLetters reads the dead-letter topic.
func (b *parkBed) deadLetters(t *testing.T) []letter {
	t.Helper()
	var out []letter
	for _, r := range b.e.Bed.ConsumeAll(t, []string{b.dlq}, time.Second) {
		id, _ := harness.Header(r, "walrelay.event.id")
		out = append(out, letter{at: fmt.Sprintf("%d:%d", r.Partition, r.Offset), partition: r.Partition, offset: r.Offset, id: id})
	}
	return out
}
