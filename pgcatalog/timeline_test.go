package pgcatalog

import (
	"maps"
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestParseTimelineHistory: history files as PostgreSQL writes them
// (writeTimeLineHistory: "parentTLI\tswitchpoint\treason", one line per
// ancestor, a blank line after each), built by hand.
func TestParseTimelineHistory(t *testing.T) {
	lsn := func(s string) pglogrepl.LSN {
		l, err := pglogrepl.ParseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name    string
		tli     int32
		content string
		want    map[int32]pglogrepl.LSN
		bad     bool
	}{
		{name: "one promotion", tli: 2, content: "1\t0/3000160\tno recovery target specified\n",
			want: map[int32]pglogrepl.LSN{1: lsn("0/3000160")}},
		{name: "two promotions, blank lines", tli: 3, content: "1\t0/3000160\tno recovery target specified\n\n2\t0/5A1B2C8\tno recovery target specified\n\n",
			want: map[int32]pglogrepl.LSN{1: lsn("0/3000160"), 2: lsn("0/5A1B2C8")}},
		{name: "a timeline skipped (a branch abandoned)", tli: 4, content: "1\t0/3000160\tbefore 2000-01-01 00:00:00+00\n3\t1/A0\tat restore point \"x\"\n",
			want: map[int32]pglogrepl.LSN{1: lsn("0/3000160"), 3: lsn("1/A0")}},
		{name: "comments and spaces", tli: 2, content: "# a comment\n   \n  1\t0/16B3E88\tno recovery target specified\n",
			want: map[int32]pglogrepl.LSN{1: lsn("0/16B3E88")}},
		{name: "no reason", tli: 2, content: "1\t0/16B3E88\n", want: map[int32]pglogrepl.LSN{1: lsn("0/16B3E88")}},
		{name: "empty", tli: 2, content: "", want: map[int32]pglogrepl.LSN{}},
		{name: "no switchpoint", tli: 2, content: "1\n", bad: true},
		{name: "not a timeline id", tli: 2, content: "one\t0/16B3E88\tx\n", bad: true},
		{name: "bad switchpoint", tli: 2, content: "1\t16B3E88\tx\n", bad: true},
		{name: "ids not increasing", tli: 4, content: "2\t0/5000000\tx\n1\t0/3000000\tx\n", bad: true},
		{name: "id not below the history's timeline", tli: 2, content: "2\t0/3000000\tx\n", bad: true},
		{name: "switchpoints going back", tli: 3, content: "1\t0/5000000\tx\n2\t0/3000000\tx\n", bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTimelineHistory(c.tli, []byte(c.content))
			if c.bad {
				if err == nil {
					t.Fatalf("parsed %q as %v, want an error", c.content, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse %q: %v", c.content, err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("parse %q: %v, want %v", c.content, got, c.want)
			}
		})
	}
}
