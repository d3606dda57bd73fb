package dlq

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/walrelay/walrelay/kafkastate"
)

// list prints the parked aggregates, then the dead letters by reason and
// by topic: counts and the oldest's age.
func (t *Tool) list(ctx context.Context) error {
	v, err := t.scan(ctx)
	if err != nil {
		return err
	}
	printList(t.out, v)
	return nil
}

// printList is list's output of v.
func printList(w io.Writer, v *View) {
	ids := slices.Sorted(maps.Keys(v.Parks.All()))
	var parked []string
	for _, id := range ids {
		if v.Parks.Get(id).IsParked() {
			parked = append(parked, id)
		}
	}
	fmt.Fprintf(w, "parked aggregates: %d\n", len(parked))
	for _, id := range parked {
		p := v.Parks.Get(id).Park
		pending := pendingLetters(v, id)
		redrivable := 0
		for _, l := range pending {
			if l.Redrivable {
				redrivable++
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  %s\n", id)
		fmt.Fprintf(tw, "    topic\t%s\n", p.Topic)
		fmt.Fprintf(tw, "    key\t%s\n", p.Key)
		fmt.Fprintf(tw, "    parked behind\tevent %s (%s), at %s, %s ago\n", p.FirstEventID, p.Reason, p.Start, age(v.At, p.ParkedAt))
		fmt.Fprintf(tw, "    parked through\t%s\n", p.Through)
		fmt.Fprintf(tw, "    dead letters\t%d, %d can be re-published\n", len(pending), redrivable)
		if r := v.Parks.Get(id).Release; r != nil {
			fmt.Fprintf(tw, "    last release\t%s through %s\n", r.By, r.Through)
		}
		tw.Flush()
	}
	type group struct {
		n      int
		oldest time.Time
	}
	byReason, byTopic := map[string]*group{}, map[string]*group{}
	seen := map[string]bool{}
	for _, l := range v.Letters {
		// N.B. a parked event dead-lettered again after a restart counts once.
		if l.HasPos && l.Aggregate != "" {
			k := l.Aggregate + "@" + l.Pos.String()
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		topic := l.Topic
		if topic == "" {
			topic = "(none)"
		}
		for _, g := range []struct {
			m map[string]*group
			k string
		}{{byReason, l.Class}, {byTopic, topic}} {
			e := g.m[g.k]
			if e == nil {
				e = &group{}
				g.m[g.k] = e
			}
			e.n++
			if e.oldest.IsZero() || l.Time.Before(e.oldest) {
				e.oldest = l.Time
			}
		}
	}
	for _, sec := range []struct {
		name string
		m    map[string]*group
	}{{"reason", byReason}, {"topic", byTopic}} {
		fmt.Fprintf(w, "dead letters by %s:\n", sec.name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, k := range slices.Sorted(maps.Keys(sec.m)) {
			fmt.Fprintf(tw, "  %s\t%d\toldest %s ago\n", k, sec.m[k].n, age(v.At, sec.m[k].oldest))
		}
		tw.Flush()
	}
}

// age is how long before now at was, in whole seconds.
func age(now, at time.Time) time.Duration { return now.Sub(at).Round(time.Second) }

// pendingLetters are the dead letters of aggregate id that a redrive
// would re-publish: those after its last release, from the event that
// parked it through the newest it parked, one per position, in position
// order.
func pendingLetters(v *View, id string) []Letter {
	a := v.Parks.Get(id)
	if a == nil || a.Park == nil {
		return nil
	}
	var after *kafkastate.Pos
	if a.Release != nil {
		after = &a.Release.Through
	}
	byPos := map[kafkastate.Pos]Letter{}
	for _, l := range v.Letters {
		if l.Aggregate != id || !l.HasPos || l.Pos.Compare(a.Park.Start) < 0 || l.Pos.Compare(a.Park.Through) > 0 ||
			after != nil && l.Pos.Compare(*after) <= 0 {
			continue
		}
		if _, dup := byPos[l.Pos]; !dup {
			byPos[l.Pos] = l
		}
	}
	out := slices.Collect(maps.Values(byPos))
	slices.SortFunc(out, func(x, y Letter) int { return x.Pos.Compare(y.Pos) })
	return out
}
