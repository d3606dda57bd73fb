package sink

import (
	"context"
	"testing"
)

// TestSharedCanceledHoldsOnlyTopicSharers: franz-go's line for partitions
// failed because their first record's context ended maps to
// canceledScope; on a shared client it holds only the sinks that share a
// topic with a held sink (whose records may lead theirs in a batch), not
// the others; a line that fails every record holds every sink.
func TestSharedCanceledHoldsOnlyTopicSharers(t *testing.T) {
	if topic, ok := failedScope("the first record in some partition(s) had a context cancelation; failing all relevant partitions", []any{"broker", "1"}); !ok || topic != canceledScope {
		t.Fatalf("failedScope of the context line: %q %v, want canceledScope", topic, ok)
	}
	mk := func(topics ...string) *Sink {
		ctx, cancel := context.WithCancel(context.Background())
		s := &Sink{held: ctx, hold: cancel}
		for _, tp := range topics {
			s.topics.Store(tp, true)
		}
		return s
	}
	closing, other, sharing := mk("t.a"), mk("t.b"), mk("t.c", "t.a")
	g := &sharedGen{members: map[*Sink]bool{closing: true, other: true, sharing: true}}
	closing.hold()
	g.failed(canceledScope)
	if other.held.Err() != nil {
		t.Error("a sink sharing no topic with the held one was held")
	}
	if sharing.held.Err() == nil {
		t.Error("a sink sharing a topic with the held one was not held")
	}
	g.failed("")
	if other.held.Err() == nil {
		t.Error("a line failing every record did not hold every sink")
	}
}
