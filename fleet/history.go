package fleet

import (
	"sync"
	"time"
)

// historyEvery is the step of a pipeline's events-per-second history (the
// status page's chart); historyLen the points it keeps: 10 minutes.
const (
	historyEvery = 10 * time.Second
	historyLen   = 60
)

// history is a ring of a pipeline's events per second, one point per
// historyEvery, the newest last, from the published count sampled by the
// fleet's loop (every rateEvery).
type history struct {
	mu     sync.Mutex
	last   sample // the count at the newest point; zero: none yet
	points []float64
}

// add records count at at: a new point, the rate since the last one, once
// historyEvery has passed since it; the first call only sets the origin.
func (h *history) add(at time.Time, count float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last.at.IsZero() {
		h.last = sample{at, count}
		return
	}
	dt := at.Sub(h.last.at)
	if dt < historyEvery {
		return
	}
	h.points = append(h.points, max(0, count-h.last.count)/dt.Seconds())
	if len(h.points) > historyLen {
		h.points = h.points[len(h.points)-historyLen:]
	}
	h.last = sample{at, count}
}

// rates is a copy of the points, the oldest first.
func (h *history) rates() []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]float64(nil), h.points...)
}
