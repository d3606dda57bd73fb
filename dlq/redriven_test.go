package dlq

import (
	"fmt"
	"testing"

	"github.com/walrelay/walrelay/kafkastate"
)

// TestStaleRedriven: a record of a re-published dead letter is kept while
// the dead-letter topic holds that event at its offset, and is stale once
// the letter is past the topic's retention, another event sits at its
// offset or none does (the topic made anew); another topic's records and a
// topic Kafka does not list are left alone. redriven follows the same
// rule for one letter.
func TestStaleRedriven(t *testing.T) {
	const dlq = "d"
	rec := func(p int32, o int64, id string) kafkastate.Redriven {
		return kafkastate.Redriven{DeadLetterTopic: dlq, Partition: p, Offset: o, EventID: id}
	}
	v := &View{
		Letters: []Letter{{Partition: 0, Offset: 5, EventID: "e5"}, {Partition: 0, Offset: 6, EventID: "new"}, {Partition: 1, Offset: 0, EventID: "x"}},
		Starts:  map[int32]int64{0: 5, 1: 0},
		Redriven: map[string]kafkastate.Redriven{
			kafkastate.RedrivenKey(dlq, 0, 4):     rec(0, 4, "e4"),  // past retention
			kafkastate.RedrivenKey(dlq, 0, 5):     rec(0, 5, "e5"),  // held
			kafkastate.RedrivenKey(dlq, 0, 6):     rec(0, 6, "old"), // another event there
			kafkastate.RedrivenKey(dlq, 1, 0):     rec(1, 0, ""),    // an older walrelay's: no event named
			kafkastate.RedrivenKey(dlq, 1, 9):     rec(1, 9, "e9"),  // none there
			kafkastate.RedrivenKey("other", 0, 1): {DeadLetterTopic: "other", Partition: 0, Offset: 1, EventID: "o"},
		},
	}
	want := []string{kafkastate.RedrivenKey(dlq, 0, 4), kafkastate.RedrivenKey(dlq, 0, 6), kafkastate.RedrivenKey(dlq, 1, 9)}
	if got := v.stale(dlq); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stale %v, want %v", got, want)
	}
	for _, tc := range []struct {
		l    Letter
		want bool
	}{
		{Letter{Partition: 0, Offset: 5, EventID: "e5"}, true},
		{Letter{Partition: 0, Offset: 6, EventID: "new"}, false},
		{Letter{Partition: 1, Offset: 0, EventID: "x"}, true},
		{Letter{Partition: 1, Offset: 1, EventID: "y"}, false},
	} {
		if got := v.redriven(dlq, tc.l); got != tc.want {
			t.Errorf("redriven(%+v) = %v, want %v", tc.l, got, tc.want)
		}
	}
	v.Starts = map[int32]int64{}
	if got := v.stale(dlq); got != nil {
		t.Errorf("stale %v while Kafka lists no partition of the topic, want none", got)
	}
}
