package sink

import (
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/replication"
)

// TestSkipBound: what a checkpoint (end LSN, timeline) covers on a server
// of timeline tli whose history file has the content given (built by
// hand): all of it on its own timeline, the history shared up to where
// its timeline ended on a later one, nothing when its timeline is not in
// the history.
func TestSkipBound(t *testing.T) {
	lsn := func(s string) pglogrepl.LSN {
		l, err := pglogrepl.ParseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	const promoted = "1\t0/190E238\tno recovery target specified\n"
	const twice = "1\t0/3000000\tno recovery target specified\n\n2\t0/5000000\tno recovery target specified\n"
	for _, c := range []struct {
		name    string
		tli     int32 // the server's
		history string
		cp      string
		cpTLI   int32
		want    string
		cov     coverage
	}{
		{name: "same timeline", tli: 1, cp: "0/19DC7F8", cpTLI: 1, want: "0/19DC7F8", cov: covered},
		{name: "same timeline after a promotion", tli: 2, history: promoted, cp: "0/2000000", cpTLI: 2, want: "0/2000000", cov: covered},
		{name: "no timeline in the checkpoint: the server's", tli: 2, history: promoted, cp: "0/19DC7F8", cpTLI: 0, want: "0/19DC7F8", cov: covered},
		{name: "parent ended before the checkpoint (standby behind)", tli: 2, history: promoted, cp: "0/19DC7F8", cpTLI: 1, want: "0/190E238", cov: sharedPart},
		{name: "parent ended after the checkpoint", tli: 2, history: promoted, cp: "0/1000000", cpTLI: 1, want: "0/1000000", cov: covered},
		{name: "parent ended at the checkpoint", tli: 2, history: promoted, cp: "0/190E238", cpTLI: 1, want: "0/190E238", cov: covered},
		{name: "grandparent ended before the checkpoint", tli: 3, history: twice, cp: "0/4000000", cpTLI: 1, want: "0/3000000", cov: sharedPart},
		{name: "parent of two promotions ended before the checkpoint", tli: 3, history: twice, cp: "0/6000000", cpTLI: 2, want: "0/5000000", cov: sharedPart},
		{name: "checkpoint of a newer timeline than the server's", tli: 2, history: promoted, cp: "0/2000000", cpTLI: 3, want: "0/0", cov: notShared},
		{name: "checkpoint of another branch", tli: 3, history: "1\t0/3000000\tx\n", cp: "0/3500000", cpTLI: 2, want: "0/0", cov: notShared},
		{name: "checkpoint of a later timeline on a server of timeline 1", tli: 1, cp: "0/3500000", cpTLI: 2, want: "0/0", cov: notShared},
	} {
		t.Run(c.name, func(t *testing.T) {
			ends, err := replication.ParseTimelineHistory(c.tli, []byte(c.history))
			if err != nil {
				t.Fatal(err)
			}
			src := Source{Timeline: c.tli, TimelineEnds: ends}
			got, cov := src.skipBound(lsn(c.cp), c.cpTLI)
			if got != lsn(c.want) || cov != c.cov {
				t.Errorf("checkpoint %s of timeline %d on timeline %d (history %q): bound %s (coverage %d), want %s (coverage %d)",
					c.cp, c.cpTLI, c.tli, c.history, got, cov, c.want, c.cov)
			}
		})
	}
}
