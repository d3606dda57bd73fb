package main

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestInboxKeySpreads: the even keys put 1,000 of 6,000 records on each
// partition by Kafka's default partitioner (kgo's murmur2, the Java
// client's), the skewed ones 1,000 / 900 / 1,200 / 600 / 1,400 / 900 (what
// a real broker reported for k0..k59 in the 2026-12-06 runs).
func TestInboxKeySpreads(t *testing.T) {
	part := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, c := range []struct {
		spread string
		want   []int
	}{
		{"even", []int{1000, 1000, 1000, 1000, 1000, 1000}},
		{"skewed", []int{1000, 900, 1200, 600, 1400, 900}},
	} {
		keys := inboxKeyNames(c.spread)
		if len(keys) != 60 {
			t.Fatalf("%s: %d keys, want 60", c.spread, len(keys))
		}
		got := make([]int, inboxPartitions)
		for i := 0; i < 6000; i++ {
			got[part.Partition(&kgo.Record{Key: []byte(keys[i%len(keys)])}, inboxPartitions)]++
		}
		for p := range got {
			if got[p] != c.want[p] {
				t.Errorf("%s: records per partition %v, want %v", c.spread, got, c.want)
				break
			}
		}
	}
	if inboxKeyNames("uniform") != nil {
		t.Error("an unknown spread gave keys")
	}
}
