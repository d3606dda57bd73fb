package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

const start = pglogrepl.LSN(0x16_B3740000)

func TestTracker(t *testing.T) {
	type step struct {
		op   string // "begin", "add", "ack", "close"
		tx   int    // index in Begin order
		n    int    // add: records
		end  pglogrepl.LSN
		want pglogrepl.LSN // watermark after the step
	}
	tests := []struct {
		name  string
		start pglogrepl.LSN
		steps []step
	}{
		{
			name:  "watermark starts at New's start",
			start: start,
		},
		{
			name:  "empty tx advances immediately",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start + 0x100},
			},
		},
		{
			name:  "close before acks",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "add", tx: 0, n: 2, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start},
				{op: "ack", tx: 0, want: start},
				{op: "ack", tx: 0, want: start + 0x100},
			},
		},
		{
			name:  "acks before close",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "add", tx: 0, n: 2, want: start},
				{op: "ack", tx: 0, want: start},
				{op: "ack", tx: 0, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start + 0x100},
			},
		},
		{
			name:  "records added after some were acked",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "add", tx: 0, n: 1, want: start},
				{op: "ack", tx: 0, want: start},
				{op: "add", tx: 0, n: 1, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start},
				{op: "ack", tx: 0, want: start + 0x100},
			},
		},
		{
			name:  "never passes a tx with a pending record",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "begin", tx: 1, want: start},
				{op: "add", tx: 0, n: 1, want: start},
				{op: "add", tx: 1, n: 1, want: start},
				{op: "close", tx: 1, end: start + 0x200, want: start},
				{op: "ack", tx: 1, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start},
				{op: "ack", tx: 0, want: start + 0x200},
			},
		},
		{
			name:  "empty tx behind a pending one waits",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "add", tx: 0, n: 1, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start},
				{op: "begin", tx: 1, want: start},
				{op: "close", tx: 1, end: start + 0x200, want: start},
				{op: "begin", tx: 2, want: start},
				{op: "ack", tx: 0, want: start + 0x200},
				{op: "close", tx: 2, end: start + 0x300, want: start + 0x300},
			},
		},
		{
			name:  "advances over a prefix and stops at an unclosed tx",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "begin", tx: 1, want: start},
				{op: "begin", tx: 2, want: start},
				{op: "close", tx: 2, end: start + 0x300, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start + 0x100},
				{op: "add", tx: 1, n: 1, want: start + 0x100},
				{op: "ack", tx: 1, want: start + 0x100},
				{op: "close", tx: 1, end: start + 0x200, want: start + 0x300},
			},
		},
		{
			name:  "an end below the start does not move the watermark back",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "close", tx: 0, end: start - 0x100, want: start},
				{op: "begin", tx: 1, want: start},
				{op: "close", tx: 1, end: start + 0x100, want: start + 0x100},
			},
		},
		{
			name:  "an extra ack holds the watermark back",
			start: start,
			steps: []step{
				{op: "begin", tx: 0, want: start},
				{op: "add", tx: 0, n: 1, want: start},
				{op: "ack", tx: 0, want: start},
				{op: "ack", tx: 0, want: start},
				{op: "close", tx: 0, end: start + 0x100, want: start},
			},
		},
		{
			name: "start at zero",
			steps: []step{
				{op: "begin", tx: 0, want: 0},
				{op: "close", tx: 0, end: 0x100, want: 0x100},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(tt.start)
			if got := tr.Watermark(); got != tt.start {
				t.Fatalf("Watermark() after New(%s) = %s", tt.start, got)
			}
			var txs []*Tx
			for i, s := range tt.steps {
				switch s.op {
				case "begin":
					if s.tx != len(txs) {
						t.Fatalf("step %d: bad test, begin of tx %d after %d", i, s.tx, len(txs))
					}
					txs = append(txs, tr.Begin(s.end))
				case "add":
					txs[s.tx].Add(s.n)
				case "ack":
					txs[s.tx].Ack()
				case "close":
					txs[s.tx].Close(s.end)
				default:
					t.Fatalf("step %d: bad op %q", i, s.op)
				}
				if got := tr.Watermark(); got != s.want {
					t.Fatalf("step %d (%s tx %d): Watermark() = %s, want %s", i, s.op, s.tx, got, s.want)
				}
			}
		})
	}
}

func TestTrackerInFlight(t *testing.T) {
	tr := New(start)
	check := func(what string, wantRecords, wantTxs int64, wantOldest time.Time) {
		t.Helper()
		records, txs, oldest := tr.InFlight()
		if records != wantRecords || txs != wantTxs || !oldest.Equal(wantOldest) {
			t.Errorf("%s: InFlight() = %d, %d, %v; want %d, %d, %v", what, records, txs, oldest, wantRecords, wantTxs, wantOldest)
		}
	}
	check("new", 0, 0, time.Time{})

	before := time.Now()
	a := tr.Begin(start + 0x10)
	after := time.Now()
	_, _, oldest := tr.InFlight()
	if oldest.Before(before) || oldest.After(after) {
		t.Errorf("oldest = %v, want between %v and %v", oldest, before, after)
	}
	time.Sleep(time.Millisecond) // so that b's registration time differs from a's
	b := tr.Begin(start + 0x20)
	_, _, oldestB := tr.InFlight()
	if !oldestB.Equal(oldest) {
		t.Errorf("oldest moved to %v while the first tx is in flight", oldestB)
	}
	a.Add(3)
	b.Add(2)
	check("after Add", 5, 2, oldest)

	b.Ack()
	b.Ack()
	b.Close(start + 0x200)
	check("second tx acked and closed, first pending", 3, 2, oldest)

	a.Ack()
	a.Close(start + 0x100)
	check("first tx closed with 2 pending", 2, 2, oldest)
	a.Ack()
	a.Ack()
	check("all acked", 0, 0, time.Time{})
	if got := tr.Watermark(); got != start+0x200 {
		t.Errorf("Watermark() = %s, want %s", got, start+0x200)
	}

	c := tr.Begin(start + 0x300)
	c.Add(1)
	_, _, oldestC := tr.InFlight()
	if !oldestC.After(oldest) {
		t.Errorf("oldest = %v after the earlier transactions passed, want the new one's registration time", oldestC)
	}
	check("a new tx", 1, 1, oldestC)
}

// model is the reference: the watermark is the end LSN of the longest prefix
// of registered transactions that are closed and have every added record
// acknowledged, or the start.
type model struct {
	start   pglogrepl.LSN
	begun   int
	added   []int
	acked   []int
	closed  []bool
	ends    []pglogrepl.LSN
	records int64
	pass    int // transactions known to be passed
}

func (m *model) passed() int {
	// A passed transaction stays passed: it is closed, so nothing is added
	// to it any more.
	for m.pass < m.begun && m.closed[m.pass] && m.acked[m.pass] == m.added[m.pass] {
		m.pass++
	}
	return m.pass
}

func (m *model) watermark() pglogrepl.LSN {
	wm := m.start
	for i := range m.passed() {
		wm = max(wm, m.ends[i])
	}
	return wm
}

type op struct {
	kind string // "begin", "add", "ack", "close"
	tx   int
	n    int
}

func (o op) String() string {
	if o.kind == "add" {
		return fmt.Sprintf("add(tx %d, %d)", o.tx, o.n)
	}
	return fmt.Sprintf("%s(tx %d)", o.kind, o.tx)
}

// txOps returns one transaction's operations in an order the sink could
// make them: its records are added (in chunks) before they are acked, Close
// comes after the last Add, and acks come before or after Close.
func txOps(rng *rand.Rand, tx, records int) []op {
	var ops []op
	added, acked := 0, 0
	for added < records || acked < records {
		if added < records && (acked == added || rng.IntN(2) == 0) {
			n := 1 + rng.IntN(records-added)
			ops = append(ops, op{kind: "add", tx: tx, n: n})
			added += n
			continue
		}
		ops = append(ops, op{kind: "ack", tx: tx})
		acked++
	}
	// Close goes anywhere after the last add.
	lastAdd := -1
	for i, o := range ops {
		if o.kind == "add" {
			lastAdd = i
		}
	}
	at := lastAdd + 1 + rng.IntN(len(ops)-lastAdd)
	ops = append(ops[:at], append([]op{{kind: "close", tx: tx}}, ops[at:]...)...)
	return ops
}

// schedule interleaves the transactions' operations at random, among the
// window oldest unfinished transactions. With beginsFirst every Begin comes
// first, in order; otherwise Begin i comes after Begin i-1 and before the
// operations of transaction i, anywhere in the interleaving.
func schedule(rng *rand.Rand, counts []int, beginsFirst bool, window int) []op {
	perTx := make([][]op, len(counts))
	for i, c := range counts {
		perTx[i] = txOps(rng, i, c)
		if !beginsFirst {
			perTx[i] = append([]op{{kind: "begin", tx: i}}, perTx[i]...)
		}
	}
	var ops []op
	if beginsFirst {
		for i := range counts {
			ops = append(ops, op{kind: "begin", tx: i})
		}
	}
	begun := 0
	if beginsFirst {
		begun = len(counts)
	}
	oldest := 0 // the oldest transaction with operations left
	for {
		for oldest < len(perTx) && len(perTx[oldest]) == 0 {
			oldest++
		}
		// A transaction is eligible if it has operations left and, when
		// its first one is its Begin, every earlier one has begun.
		var ready []int
		for i := oldest; i < min(oldest+window, len(perTx)); i++ {
			q := perTx[i]
			if len(q) == 0 {
				continue
			}
			if q[0].kind == "begin" && i != begun {
				continue
			}
			ready = append(ready, i)
		}
		if len(ready) == 0 {
			return ops
		}
		i := ready[rng.IntN(len(ready))]
		o := perTx[i][0]
		perTx[i] = perTx[i][1:]
		if o.kind == "begin" {
			begun++
		}
		ops = append(ops, o)
	}
}

func TestTrackerAgainstModel(t *testing.T) {
	tests := []struct {
		name        string
		txs         int
		maxRecords  int
		beginsFirst bool
		window      int // how many transactions are interleaved; 0: all
		seeds       int
	}{
		{name: "begins first", txs: 20, maxRecords: 5, beginsFirst: true, seeds: 50},
		{name: "begins interleaved", txs: 20, maxRecords: 5, seeds: 50},
		{name: "mostly empty transactions", txs: 40, maxRecords: 1, seeds: 20},
		// Thousands registered ahead of the watermark exercise the
		// tracker's queue compaction.
		{name: "many transactions, sliding window", txs: 2500, maxRecords: 3, beginsFirst: true, window: 8, seeds: 3},
		{name: "many transactions, begins interleaved", txs: 2500, maxRecords: 3, window: 8, seeds: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := uint64(1); seed <= uint64(tt.seeds); seed++ {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					window := tt.window
					if window == 0 {
						window = tt.txs
					}
					runModel(t, seed, tt.txs, tt.maxRecords, tt.beginsFirst, window)
				})
			}
		})
	}
}

func runModel(t *testing.T, seed uint64, n, maxRecords int, beginsFirst bool, window int) {
	rng := rand.New(rand.NewPCG(seed, 0x77616c72656c6179))
	counts := make([]int, n)
	ends := make([]pglogrepl.LSN, n)
	end := start
	for i := range counts {
		counts[i] = rng.IntN(maxRecords + 1)
		end += pglogrepl.LSN(1 + rng.IntN(0x1000))
		ends[i] = end
	}
	ops := schedule(rng, counts, beginsFirst, window)

	m := &model{start: start, ends: ends, added: make([]int, n), acked: make([]int, n), closed: make([]bool, n)}
	tr := New(start)
	txs := make([]*Tx, n)
	prev := tr.Watermark()
	var history []string
	fail := func(format string, args ...any) {
		t.Helper()
		last := history[max(0, len(history)-12):]
		t.Fatalf("seed %d, op %d of %d: %s\nlast operations: %s", seed, len(history), len(ops), fmt.Sprintf(format, args...), strings.Join(last, " "))
	}
	for _, o := range ops {
		history = append(history, o.String())
		switch o.kind {
		case "begin":
			txs[o.tx] = tr.Begin(ends[o.tx] - 1)
			m.begun++
		case "add":
			txs[o.tx].Add(o.n)
			m.added[o.tx] += o.n
			m.records += int64(o.n)
		case "ack":
			txs[o.tx].Ack()
			m.acked[o.tx]++
			m.records--
		case "close":
			txs[o.tx].Close(ends[o.tx])
			m.closed[o.tx] = true
		}
		got, want := tr.Watermark(), m.watermark()
		if got != want {
			fail("Watermark() = %s, model says %s", got, want)
		}
		if got < prev {
			fail("Watermark() went back from %s to %s", prev, got)
		}
		prev = got
		records, inflight, _ := tr.InFlight()
		if wantTxs := int64(m.begun - m.passed()); records != m.records || inflight != wantTxs {
			fail("InFlight() = %d records, %d txs; model says %d, %d", records, inflight, m.records, wantTxs)
		}
	}
	if got := tr.Watermark(); got != ends[n-1] {
		t.Fatalf("seed %d: final Watermark() = %s, want the last end %s", seed, got, ends[n-1])
	}
}

func TestTrackerConcurrentAcks(t *testing.T) {
	// The sink's shape: one goroutine registers transactions and adds their
	// records, acks arrive out of order from several partition goroutines,
	// and an observer checks the watermark while it moves. Run with -race.
	const (
		n          = 2000
		partitions = 4
	)
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			counts := make([]int, n)
			ends := make([]pglogrepl.LSN, n)
			end := start
			for i := range counts {
				counts[i] = rng.IntN(6)
				end += pglogrepl.LSN(1 + rng.IntN(0x1000))
				ends[i] = end
			}
			// Counted before the matching call, so that whatever the
			// observer sees the tracker pass has been counted.
			acked := make([]atomic.Int64, n)
			closed := make([]atomic.Bool, n)

			tr := New(start)
			type record struct{ tx int }
			parts := make([]chan record, partitions)
			// txs[i] is written before tx i's records are sent to a
			// partition, so the channel orders it before every read.
			txs := make([]*Tx, n)
			var wg sync.WaitGroup
			for p := range parts {
				parts[p] = make(chan record, 64)
				prng := rand.New(rand.NewPCG(seed, uint64(p)+2))
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Hold a few records back and ack them in random order.
					var held []record
					ack := func(i int) {
						r := held[i]
						held = append(held[:i], held[i+1:]...)
						acked[r.tx].Add(1)
						txs[r.tx].Ack()
					}
					for r := range parts[p] {
						held = append(held, r)
						if len(held) > prng.IntN(8) {
							ack(prng.IntN(len(held)))
						}
					}
					for len(held) > 0 {
						ack(prng.IntN(len(held)))
					}
				}()
			}

			stop := make(chan struct{})
			observed := make(chan error, 1)
			go func() {
				prev := start
				for {
					select {
					case <-stop:
						observed <- nil
						return
					default:
					}
					wm := tr.Watermark()
					if wm < prev {
						observed <- fmt.Errorf("Watermark() went back from %s to %s", prev, wm)
						return
					}
					prev = wm
					// Every transaction at or below the watermark is closed
					// and fully acked.
					for i := 0; i < n && ends[i] <= wm; i++ {
						if !closed[i].Load() || acked[i].Load() != int64(counts[i]) {
							observed <- fmt.Errorf("Watermark() %s passes tx %d (end %s): closed %v, %d of %d records acked",
								wm, i, ends[i], closed[i].Load(), acked[i].Load(), counts[i])
							return
						}
					}
				}
			}()

			for i := range n {
				x := tr.Begin(ends[i] - 1)
				txs[i] = x
				// Add records one at a time or all at once, as the sink may.
				oneByOne := rng.IntN(2) == 0
				if !oneByOne {
					x.Add(counts[i])
				}
				for range counts[i] {
					if oneByOne {
						x.Add(1)
					}
					parts[rng.IntN(partitions)] <- record{tx: i}
				}
				closed[i].Store(true)
				x.Close(ends[i])
			}
			for _, c := range parts {
				close(c)
			}
			wg.Wait()
			close(stop)
			if err := <-observed; err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if got := tr.Watermark(); got != ends[n-1] {
				t.Fatalf("seed %d: final Watermark() = %s, want %s", seed, got, ends[n-1])
			}
			if records, inflight, oldest := tr.InFlight(); records != 0 || inflight != 0 || !oldest.IsZero() {
				t.Fatalf("seed %d: InFlight() = %d, %d, %v after every ack; want 0, 0, zero", seed, records, inflight, oldest)
			}
		})
	}
}
