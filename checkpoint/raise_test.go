package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestRaise(t *testing.T) {
	type step struct {
		op     string // "raise", "begin", "add", "ack", "close"
		tx     int
		n      int
		lsn    pglogrepl.LSN // raise: the position; close: the end
		wantOK bool          // raise: what it reports
		want   pglogrepl.LSN // watermark after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "raises a fresh tracker",
			steps: []step{
				{op: "raise", lsn: start + 0x500, wantOK: true, want: start + 0x500},
			},
		},
		{
			name: "never lowers",
			steps: []step{
				{op: "raise", lsn: start - 0x100, wantOK: true, want: start},
				{op: "raise", lsn: start + 0x200, wantOK: true, want: start + 0x200},
				{op: "raise", lsn: start + 0x100, wantOK: true, want: start + 0x200},
			},
		},
		{
			name: "refused while a transaction is registered",
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "raise", lsn: start + 0x500, wantOK: false, want: start},
				{op: "add", tx: 0, n: 1, want: start},
				{op: "close", tx: 0, lsn: start + 0x100, want: start},
				{op: "raise", lsn: start + 0x500, wantOK: false, want: start},
				{op: "ack", tx: 0, want: start + 0x100},
				{op: "raise", lsn: start + 0x500, wantOK: true, want: start + 0x500},
			},
		},
		{
			name: "a position already passed is reported as reached while a transaction is registered",
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "raise", lsn: start, wantOK: true, want: start},
				{op: "raise", lsn: start - 0x10, wantOK: true, want: start},
			},
		},
		{
			name: "a transaction ending below a raised watermark does not lower it",
			steps: []step{
				{op: "raise", lsn: start + 0x500, wantOK: true, want: start + 0x500},
				{op: "begin", tx: 0, want: start + 0x500},
				{op: "add", tx: 0, n: 1, want: start + 0x500},
				{op: "close", tx: 0, lsn: start + 0x100, want: start + 0x500},
				{op: "ack", tx: 0, want: start + 0x500},
				{op: "begin", tx: 1, want: start + 0x500},
				{op: "close", tx: 1, lsn: start + 0x600, want: start + 0x600},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(start)
			var txs []*Tx
			for i, s := range tt.steps {
				switch s.op {
				case "raise":
					if ok := tr.Raise(s.lsn); ok != s.wantOK {
						t.Fatalf("step %d: Raise(%s) = %v, want %v", i, s.lsn, ok, s.wantOK)
					}
				case "begin":
					txs = append(txs, tr.Begin(0))
				case "add":
					txs[s.tx].Add(s.n)
				case "ack":
					txs[s.tx].Ack()
				case "close":
					txs[s.tx].Close(s.lsn)
				}
				if got := tr.Watermark(); got != s.want {
					t.Fatalf("step %d (%s): Watermark() = %s, want %s", i, s.op, got, s.want)
				}
			}
		})
	}
}

// TestRaiseRandom interleaves Raise calls with transactions acknowledged out
// of order and checks the invariants against a reference: the watermark
// never decreases, never passes a transaction with an unacknowledged
// record, and Raise succeeds exactly when nothing is registered and not yet
// passed, or the position is already reached.
func TestRaiseRandom(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			tr := New(start)
			type rtx struct {
				x            *Tx
				end          pglogrepl.LSN
				added, acked int
				closed       bool
			}
			var live []*rtx // registered, in Begin order
			next := start   // the LSN the next transaction ends after
			prev := tr.Watermark()
			for op := 0; op < 400; op++ {
				switch r := rng.IntN(10); {
				case r < 2: // raise
					lsn := prev - 0x100 + pglogrepl.LSN(rng.IntN(0x400))
					// live holds only what the watermark has not passed.
					want := lsn <= prev || len(live) == 0
					if got := tr.Raise(lsn); got != want {
						t.Fatalf("op %d: Raise(%s) = %v with watermark %s and %d transactions registered, want %v", op, lsn, got, prev, len(live), want)
					}
					if want && lsn > next {
						next = lsn
					}
				case r < 4: // begin a transaction, maybe with records
					x := &rtx{x: tr.Begin(0)}
					if n := rng.IntN(3); n > 0 {
						x.x.Add(n)
						x.added = n
					}
					live = append(live, x)
				case r < 7 && len(live) > 0: // ack a record of any transaction
					x := live[rng.IntN(len(live))]
					if x.acked < x.added {
						x.x.Ack()
						x.acked++
					}
				case len(live) > 0: // close the oldest open transaction
					for _, x := range live {
						if !x.closed {
							next += pglogrepl.LSN(1 + rng.IntN(0x100))
							x.end, x.closed = next, true
							x.x.Close(x.end)
							break
						}
					}
				}
				// Drop the passed prefix, as the tracker does.
				for len(live) > 0 && live[0].closed && live[0].acked == live[0].added {
					live = live[1:]
				}
				wm := tr.Watermark()
				if wm < prev {
					t.Fatalf("op %d: watermark went back from %s to %s", op, prev, wm)
				}
				for _, x := range live {
					if x.closed && x.acked < x.added && wm >= x.end {
						t.Fatalf("op %d: watermark %s passes a transaction ending at %s with %d of %d records acked", op, wm, x.end, x.acked, x.added)
					}
				}
				prev = wm
			}
		})
	}
}
