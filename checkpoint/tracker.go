package checkpoint

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
)

// Tracker is the in-order acknowledgement tracker. Begin is called by one
// goroutine (the producing one); Add, Ack and Close may be called from any
// goroutine, in any order across transactions.
type Tracker struct {
	mu    sync.Mutex
	queue []*Tx // registered, not yet passed by the watermark; queue[head:] is live
	head  int

	watermark atomic.Uint64
	records   atomic.Int64 // records added and not yet acknowledged
	txs       atomic.Int64 // transactions registered and not yet passed
	// ackedSince is when the watermark first moved after the last
	// ClearAcked, unix nanoseconds; 0 if it has not. Written under mu.
	ackedSince atomic.Int64
}

// Tx is one registered transaction.
type Tx struct {
	t       *Tracker
	commit  pglogrepl.LSN
	end     pglogrepl.LSN
	begun   time.Time
	pending int
	closed  bool
}

// New returns a tracker whose watermark starts at start: the slot's
// confirmed_flush_lsn, never zero for an existing slot.
func New(start pglogrepl.LSN) *Tracker {
	t := &Tracker{}
	t.watermark.Store(uint64(start))
	return t
}

// Watermark is the LSN that may be confirmed to PostgreSQL.
func (t *Tracker) Watermark() pglogrepl.LSN { return pglogrepl.LSN(t.watermark.Load()) }

// Raise moves the watermark up to lsn, a position PostgreSQL has already
// confirmed (the slot's confirmed_flush_lsn read again once the stream holds
// the slot), provided no transaction is registered and not yet passed. It
// reports whether the watermark is now at least lsn; it never lowers it.
func (t *Tracker) Raise(lsn pglogrepl.LSN) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	wm := pglogrepl.LSN(t.watermark.Load())
	if lsn <= wm {
		return true
	}
	// N.B. only while nothing is registered: a registered transaction lies
	// at or after the watermark, and a watermark raised past it would
	// confirm it before Kafka acknowledged it.
	if t.head < len(t.queue) {
		return false
	}
	t.watermark.Store(uint64(lsn))
	return true
}

// InFlight reports the records and transactions not yet acknowledged, and
// when the oldest of those transactions was registered (zero if none).
func (t *Tracker) InFlight() (records, txs int64, oldest time.Time) {
	t.mu.Lock()
	if t.head < len(t.queue) {
		oldest = t.queue[t.head].begun
	}
	t.mu.Unlock()
	return t.records.Load(), t.txs.Load(), oldest
}

// Begin registers the next transaction in commit order. commit is its commit
// LSN (BEGIN's final LSN); it is used only for diagnostics.
func (t *Tracker) Begin(commit pglogrepl.LSN) *Tx { return t.BeginAt(commit, time.Now()) }

// BeginAt is Begin for a transaction begun at now (the caller's reading
// of the clock).
func (t *Tracker) BeginAt(commit pglogrepl.LSN, now time.Time) *Tx {
	x := &Tx{t: t, commit: commit, begun: now}
	t.mu.Lock()
	t.queue = append(t.queue, x)
	t.mu.Unlock()
	t.txs.Add(1)
	return x
}

// Add announces n more records of x, before they are produced.
func (x *Tx) Add(n int) {
	x.t.records.Add(int64(n))
	x.t.mu.Lock()
	x.pending += n
	x.t.mu.Unlock()
}

// Ack acknowledges one record of x.
func (x *Tx) Ack() {
	x.t.records.Add(-1)
	x.t.mu.Lock()
	// N.B. an extra Ack would drive pending below zero, which only ever holds
	// the watermark back: the safe direction.
	x.pending--
	if x.pending == 0 && x.closed {
		x.t.advanceLocked()
	}
	x.t.mu.Unlock()
}

// Close marks x complete: all its records were added, and end is its
// transaction end LSN (the commit record's end).
func (x *Tx) Close(end pglogrepl.LSN) {
	x.t.mu.Lock()
	x.end = end
	x.closed = true
	if x.pending == 0 {
		x.t.advanceLocked()
	}
	x.t.mu.Unlock()
}

// advanceLocked moves the watermark over the contiguous prefix of closed,
// fully acknowledged transactions.
func (t *Tracker) advanceLocked() {
	wm := pglogrepl.LSN(t.watermark.Load())
	moved := false
	for t.head < len(t.queue) {
		x := t.queue[t.head]
		if !x.closed || x.pending != 0 {
			break
		}
		t.queue[t.head] = nil
		t.head++
		t.txs.Add(-1)
		// N.B. max: a transaction's end never lies below an earlier one's,
		// but the watermark must not move backwards even if it did.
		if x.end > wm {
			wm = x.end
			moved = true
		}
	}
	if t.head == len(t.queue) {
		t.queue = t.queue[:0]
		t.head = 0
	} else if t.head > 1024 && t.head > len(t.queue)/2 {
		n := copy(t.queue, t.queue[t.head:])
		clear(t.queue[n:])
		t.queue = t.queue[:n]
		t.head = 0
	}
	if moved {
		t.watermark.Store(uint64(wm))
		if t.ackedSince.Load() == 0 {
			t.ackedSince.Store(time.Now().UnixNano())
		}
	}
}

// AckedSince is when the watermark first moved after the last ClearAcked
// (the confirmation lag's start); zero if it has not.
func (t *Tracker) AckedSince() time.Time {
	if n := t.ackedSince.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// ClearAcked forgets AckedSince if it is still since and the watermark is
// at most upTo: everything acknowledged is confirmed.
func (t *Tracker) ClearAcked(since time.Time, upTo pglogrepl.LSN) {
	t.mu.Lock()
	if t.ackedSince.Load() == since.UnixNano() && pglogrepl.LSN(t.watermark.Load()) <= upTo {
		t.ackedSince.Store(0)
	}
	t.mu.Unlock()
}
