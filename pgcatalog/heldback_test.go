package pgcatalog

import (
	"slices"
	"testing"
)

func TestParseStandbySlots(t *testing.T) {
	for _, c := range []struct {
		in    string
		names []string
		need  int
	}{
		{"", nil, 0},
		{"sb_phys", []string{"sb_phys"}, 1},
		{" SB_One , sb_two ", []string{"sb_one", "sb_two"}, 2},
		{`"Sb One",sb2`, []string{"Sb One", "sb2"}, 2},
		{`"a""b"`, []string{`a"b`}, 1},
		{"ANY 1 (sb1_slot, sb2_slot)", []string{"sb1_slot", "sb2_slot"}, 1},
		{"first 2 (a,b,c)", []string{"a", "b", "c"}, 2},
	} {
		t.Run(c.in, func(t *testing.T) {
			names, need := ParseStandbySlots(c.in)
			if !slices.Equal(names, c.names) || need != c.need {
				t.Errorf("ParseStandbySlots(%q) = %q, %d; want %q, %d", c.in, names, need, c.names, c.need)
			}
		})
	}
}

func TestStandbyWaitHolds(t *testing.T) {
	for _, c := range []struct {
		w    StandbyWait
		want bool
	}{
		{StandbyWait{}, false},
		{StandbyWait{Need: 1, Named: 1}, false},
		{StandbyWait{Need: 1, Named: 1, Stuck: []string{"x"}}, true},
		{StandbyWait{Need: 1, Named: 2, Stuck: []string{"x"}}, false},
		{StandbyWait{Need: 2, Named: 2, Stuck: []string{"x"}}, true},
	} {
		if got := c.w.Holds(); got != c.want {
			t.Errorf("%+v.Holds() = %v, want %v", c.w, got, c.want)
		}
	}
}
