package sink

import (
	"sync"
	"sync/atomic"
	"time"
)

// handoff is a run of records handed to the client together, timed as one
// by the watchdog: a Tx part's records, split when producing waits for
// room in the budget (waiting for room is not waiting for Kafka) or every
// handoffRecords records.
type handoff struct {
	at      time.Time
	pending atomic.Int64 // records handed and not finished, plus one while open
}

// handoffRecords bounds the records of one handoff, so that its time is
// that of each of its records within microseconds.
const handoffRecords = 4096

// handoffClock knows when the oldest unfinished handoff was handed over.
// N.B. it measures how long a record has waited for Kafka, not how long a
// transaction has been relayed: a transaction of any size gets through
// while Kafka keeps acknowledging, and a record Kafka does not acknowledge
// within the delivery timeout still fails the sink.
type handoffClock struct {
	mu   sync.Mutex
	q    []*handoff // in hand-off order; q[head:] is live
	head int
}

// open starts a handoff at now; seal ends it once its records are handed
// over.
func (c *handoffClock) open(now time.Time) *handoff {
	h := &handoff{at: now}
	h.pending.Store(1)
	c.mu.Lock()
	c.q = append(c.q, h)
	c.mu.Unlock()
	return h
}

func (c *handoffClock) seal(h *handoff) {
	if h != nil {
		h.pending.Add(-1)
	}
}

// reopen adds to h again if it is still unfinished (so not yet dropped
// from the clock).
func (h *handoff) reopen() bool {
	for {
		n := h.pending.Load()
		if n == 0 {
			return false
		}
		if h.pending.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// oldest is when the oldest unfinished handoff was handed over, zero if
// none is.
func (c *handoffClock) oldest() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.head < len(c.q) && c.q[c.head].pending.Load() == 0 {
		c.q[c.head] = nil
		c.head++
	}
	switch {
	case c.head == len(c.q):
		c.q, c.head = c.q[:0], 0
		return time.Time{}
	case c.head > 1024 && c.head > len(c.q)/2:
		n := copy(c.q, c.q[c.head:])
		clear(c.q[n:])
		c.q, c.head = c.q[:n], 0
	}
	return c.q[c.head].at
}
