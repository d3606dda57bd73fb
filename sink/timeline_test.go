package sink

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
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
			ends, err := pgcatalog.ParseTimelineHistory(c.tli, []byte(c.history))
			if err != nil {
				t.Fatal(err)
			}
			src := kafkastate.Source{Timeline: c.tli, TimelineEnds: ends}
			got, cov := skipBound(src, lsn(c.cp), c.cpTLI)
			if got != lsn(c.want) || cov != c.cov {
				t.Errorf("checkpoint %s of timeline %d on timeline %d (history %q): bound %s (coverage %d), want %s (coverage %d)",
					c.cp, c.cpTLI, c.tli, c.history, got, cov, c.want, c.cov)
			}
		})
	}
}

// TestExactlyOnceCheckpointOfAnotherTimeline (kfake): a checkpoint
// written on timeline 1 names its timeline; a sink on timeline 2, whose
// history says timeline 1 ended below that checkpoint, skips what lies
// below the switchpoint and produces the new timeline's transaction at an
// LSN the checkpoint would have covered.
func TestExactlyOnceCheckpointOfAnotherTimeline(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	src := kafkastate.Source{Slot: "s1", Database: "db", SystemID: "1", Timeline: 1}
	s1, _ := newSink(t, c, OnPoisonDeadLetter, 10*time.Second, func(cfg *sinkSetup) {
		cfg.ExactlyOnce = true
		cfg.Source = src
	})
	end := start + 0x1000
	if err := s1.Produce(ctx, tx(1, start+0x100, event("t", "a", "1"))); err != nil {
		t.Fatal(err)
	}
	if err := s1.Produce(ctx, tx(2, end, event("t", "b", "2"))); err != nil {
		t.Fatal(err)
	}
	if err := s1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, cp, err := kafkastate.ReadCheckpoint(ctx, s1.adm, s1.baseOpts(), s1.cfg.CheckpointTopic, src, s1.waitUndecided)
	if err != nil || cp == nil || cp.Timeline != 1 || cp.EndLSN != end.String() {
		t.Fatalf("checkpoint %+v, %v; want end_lsn %s on timeline 1", cp, err, end)
	}
	s1.Close()

	switchpoint := start + 0x200
	ends, err := pgcatalog.ParseTimelineHistory(2, []byte("1\t"+switchpoint.String()+"\tno recovery target specified\n"))
	if err != nil {
		t.Fatal(err)
	}
	src2 := src
	src2.Timeline, src2.TimelineEnds = 2, ends
	s2, tr2 := newSink(t, c, OnPoisonDeadLetter, 10*time.Second, func(cfg *sinkSetup) {
		cfg.ExactlyOnce = true
		cfg.Source = src2
		cfg.CommitInterval = 2 * time.Minute
		cfg.TransactionTimeout = 10 * time.Minute
	})
	// The shared history: covered, confirmed without a record.
	if err := s2.Produce(ctx, tx(1, start+0x100, event("t", "a", "1"))); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := tr2.InFlight(); recs != 0 || tr2.Watermark() != start+0x100 {
		t.Fatalf("a transaction of the shared history: %d records pending, watermark %s; want 0 and %s", recs, tr2.Watermark(), start+0x100)
	}
	// The new timeline's transaction, below the old checkpoint: produced.
	if err := s2.Produce(ctx, tx(3, switchpoint+0x100, event("t", "c", "3"))); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := tr2.InFlight(); recs == 0 {
		t.Fatalf("the new timeline's transaction at %s (below the old checkpoint %s, above the switchpoint %s) was skipped", switchpoint+0x100, end, switchpoint)
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, cp, err = kafkastate.ReadCheckpoint(ctx, s2.adm, s2.baseOpts(), s2.cfg.CheckpointTopic, src2, s2.waitUndecided)
	if err != nil || cp == nil || cp.Timeline != 2 || cp.EndLSN != (switchpoint+0x100).String() {
		t.Fatalf("checkpoint %+v, %v; want end_lsn %s on timeline 2", cp, err, switchpoint+0x100)
	}
}
