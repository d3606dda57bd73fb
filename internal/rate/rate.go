package rate

import "time"

// MinWindow is the shortest window a caller should measure over: a few
// close events of a quiet stream (commits that happen to come together)
// then do not count as a busy one.
const MinWindow = 100 * time.Millisecond

// Meter counts events over consecutive windows of one span.
type Meter struct {
	window time.Duration
	need   int
	start  time.Time // the start of the current window
	n      int       // events in it
	prev   int       // and in the window before it
}

// PerWait returns a Meter that reads busy while events come at worth or
// more per wait: the rate at which waiting wait gathers worth of them. It
// measures over max(wait, MinWindow).
func PerWait(worth int, wait time.Duration) Meter {
	w := max(wait, MinWindow)
	need := 1
	if wait > 0 {
		need = max(1, int(int64(worth)*int64(w)/int64(wait)))
	}
	return Meter{window: w, need: need}
}

// Count counts one event at now.
func (m *Meter) Count(now time.Time) {
	if since := now.Sub(m.start); since >= m.window {
		m.prev = m.n
		if since >= 2*m.window {
			m.prev = 0
		}
		m.start, m.n = now, 0
	}
	m.n++
}

// Busy reports whether the last whole window, or the current one so far,
// held the events needed.
func (m *Meter) Busy(now time.Time) bool {
	if now.Sub(m.start) >= 2*m.window {
		return false
	}
	return m.prev >= m.need || m.n >= m.need
}
