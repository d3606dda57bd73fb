package inbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partition is the worker of one assigned partition: it handles the
// partition's records one after the other, in offset order, and records
// the last one finished for the committer. Partitions do not wait for one
// another: a slow or retrying record holds back only its own partition.
type partition struct {
	c     *Consumer
	topic string
	p     int32

	// ctx ends when the partition is lost or Run ends: a transaction in
	// flight is abandoned (rolled back). stop is closed when the partition
	// is revoked: the attempt in hand finishes, no record or retry begins.
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	done   chan struct{} // closed when run returned

	mu     sync.Mutex // guards queue and paused: the poll loop pushes, run takes
	queue  []*kgo.Record
	paused bool
	wake   chan struct{} // capacity 1: records were pushed

	// finished is the last record handled (applied, skipped as a
	// duplicate or dead-lettered): the committer commits its offset + 1.
	finished atomic.Pointer[kgo.Record]
	// committed is the offset committed last; touched under c.commitMu.
	committed int64
	// held is how many records the partition holds (OnFailure HoldKey).
	held atomic.Int64
	// hwm is the partition's high watermark in its last fetch, nextOffset
	// the next offset to handle (-1 until a record was queued): the lag.
	hwm, nextOffset atomic.Int64
}

func newPartition(c *Consumer, base context.Context, topic string, p int32) *partition {
	w := &partition{c: c, topic: topic, p: p, stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(base)
	w.hwm.Store(-1)
	w.nextOffset.Store(-1)
	go w.run()
	return w
}

// push queues a poll's records of this partition, fetched with the
// partition's high watermark hwm.
func (w *partition) push(recs []*kgo.Record, hwm int64) {
	w.hwm.Store(hwm)
	w.nextOffset.CompareAndSwap(-1, recs[0].Offset)
	w.mu.Lock()
	w.queue = append(w.queue, recs...)
	if !w.paused && len(w.queue) >= 2*w.c.cfg.MaxPollRecords {
		// N.B. the partition's own backpressure: its fetching pauses
		// while its queue is full, so a partition in retry neither grows
		// without bound nor blocks the poll loop (the other partitions'
		// records keep coming). kgo strips a paused partition's buffered
		// records without advancing its fetch position: they are fetched
		// again on resume.
		w.paused = true
		w.c.cl.PauseFetchPartitions(map[string][]int32{w.topic: {w.p}})
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// next returns the next queued record, waiting for one; nil when the
// partition is stopped or timeout fires first.
func (w *partition) next(timeout <-chan time.Time) *kgo.Record {
	for {
		select {
		case <-w.stop:
			return nil
		case <-w.ctx.Done():
			return nil
		default:
		}
		w.mu.Lock()
		if len(w.queue) > 0 {
			r := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			if w.paused && len(w.queue) <= w.c.cfg.MaxPollRecords {
				w.paused = false
				w.c.cl.ResumeFetchPartitions(map[string][]int32{w.topic: {w.p}})
			}
			w.mu.Unlock()
			return r
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.stop:
		case <-w.ctx.Done():
		case <-timeout:
			return nil
		}
	}
}

func (w *partition) stopped() bool {
	select {
	case <-w.stop:
		return true
	case <-w.ctx.Done():
		return true
	default:
		return false
	}
}

func (w *partition) run() {
	defer close(w.done)
	defer func() {
		// N.B. a paused partition resumes when its worker ends: paused
		// partitions stay paused in the client across assignments, and
		// this one may be assigned to this member again.
		w.mu.Lock()
		if w.paused {
			w.paused = false
			w.c.cl.ResumeFetchPartitions(map[string][]int32{w.topic: {w.p}})
		}
		w.queue = nil
		w.mu.Unlock()
	}()
	next := int64(-1)
	var (
		h    holds       // OnFailure HoldKey only
		last *kgo.Record // the last record taken
	)
	for {
		var (
			due <-chan time.Time
			t   *time.Timer
		)
		if h.n > 0 {
			if !time.Now().Before(h.retryAt) {
				if w.retryHeld(&h) != nil {
					return
				}
				w.position(&h, last)
				continue
			}
			t = time.NewTimer(time.Until(h.retryAt))
			due = t.C
			if h.n >= 2*w.c.cfg.MaxPollRecords {
				// N.B. holding no more: the queue fills and the
				// partition's fetching pauses until a key is released.
				select {
				case <-due:
				case <-w.stop:
				case <-w.ctx.Done():
				}
				t.Stop()
				if w.stopped() {
					return
				}
				continue
			}
		}
		r := w.next(due)
		if t != nil {
			t.Stop()
		}
		if r == nil {
			if w.stopped() {
				return
			}
			continue // a held key is due for a retry
		}
		rs := []*kgo.Record{r}
		if w.c.cfg.BatchHandler != nil {
			rs = w.take(rs, w.c.cfg.MaxBatchRecords)
		}
		// N.B. handled or taken already: a poll's record seen twice (a
		// paused partition's records are fetched again on resume, so
		// the queue can hold a range twice).
		kept := rs[:0]
		for _, r := range rs {
			if r.Offset >= next {
				kept, next = append(kept, r), r.Offset+1
			}
		}
		if rs = kept; len(rs) == 0 {
			continue
		}
		last = rs[len(rs)-1]
		w.nextOffset.Store(next)
		if len(rs) > 1 {
			if !w.batch(&h, rs) {
				return
			}
			continue
		}
		if !w.one(&h, last) {
			return
		}
		w.position(&h, last)
	}
}

// take appends to rs the records queued, up to max in all, without
// waiting.
func (w *partition) take(rs []*kgo.Record, max int) []*kgo.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(max-len(rs), len(w.queue))
	if n <= 0 {
		return rs
	}
	rs = append(rs, w.queue[:n]...)
	clear(w.queue[:n])
	w.queue = w.queue[n:]
	if w.paused && len(w.queue) <= w.c.cfg.MaxPollRecords {
		w.paused = false
		w.c.cl.ResumeFetchPartitions(map[string][]int32{w.topic: {w.p}})
	}
	return rs
}

// halt stops the worker and waits for it: soft (revoked) lets the attempt
// in hand finish; hard (lost, Run ending) abandons it.
func (w *partition) halt(hard bool) {
	close(w.stop)
	if hard {
		w.cancel()
	}
	<-w.done
	w.cancel()
}

// lag is how many records of the partition are not handled yet, as of its
// last fetch; false before its first records.
func (w *partition) lag() (int64, bool) {
	h, n := w.hwm.Load(), w.nextOffset.Load()
	if h < 0 || n < 0 {
		return 0, false
	}
	return max(h-n, 0), true
}
