package harness

import (
	"cmp"
	"fmt"
	"slices"
)

// gapKeyOf is a key's sequence in one topic.
type gapKeyOf struct{ topic, key string }

// gaps counts the keys of byKey (their records by topic and key) where an
// event first appears while an event of its key committed before it, and
// expected in that topic, has not (Report.Gaps).
func gaps(committed []Event, byKey map[gapKeyOf][]Record) int {
	return len(gapProblems(committed, byKey))
}

// gapProblems describes each key's first gap followed by a later event.
// N.B. the expected events of a topic are the key's committed events not
// seen in another topic: a key's events in another topic (another
// aggregate type) are another sequence.
func gapProblems(committed []Event, byKey map[gapKeyOf][]Record) []string {
	byID := make(map[string]*Event, len(committed))
	for i := range committed {
		byID[committed[i].ID] = &committed[i]
	}
	topicsOf := map[string]map[string]bool{} // event id -> topics it is in
	for tk, rs := range byKey {
		for _, r := range rs {
			if topicsOf[r.ID] == nil {
				topicsOf[r.ID] = map[string]bool{}
			}
			topicsOf[r.ID][tk.topic] = true
		}
	}
	keys := slices.SortedFunc(func(yield func(gapKeyOf) bool) {
		for k := range byKey {
			if !yield(k) {
				return
			}
		}
	}, func(a, b gapKeyOf) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.key, b.key)) })
	var out []string
	for _, tk := range keys {
		// The seqs expected in this topic, in commit order.
		var want []int64
		for _, ev := range committed {
			if ev.Key != tk.key || ev.Seq == 0 {
				continue
			}
			if ts := topicsOf[ev.ID]; len(ts) > 0 && !ts[tk.topic] {
				continue
			}
			want = append(want, ev.Seq)
		}
		slices.Sort(want)
		rs := slices.Clone(byKey[tk])
		slices.SortFunc(rs, func(a, b Record) int {
			return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
		})
		seen := map[int64]bool{}
		next := 0 // want[next] is the earliest expected seq not seen yet
		for _, r := range rs {
			ev := byID[r.ID]
			if ev == nil || ev.Seq == 0 || seen[ev.Seq] {
				continue
			}
			seen[ev.Seq] = true
			if next < len(want) && ev.Seq > want[next] {
				out = append(out, fmt.Sprintf("gap: key %s in %s: seq %d appears at offset %d before seq %d", tk.key, tk.topic, ev.Seq, r.Offset, want[next]))
				break
			}
			for next < len(want) && seen[want[next]] {
				next++
			}
		}
	}
	return out
}
