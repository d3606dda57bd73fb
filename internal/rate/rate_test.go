package rate

import (
	"testing"
	"time"
)

// TestMeterBusyAtTheRate: events at the rate PerWait names read busy,
// through the window they came in and the one after; fewer do not; a stream
// quiet for two windows is not busy whatever came before.
func TestMeterBusyAtTheRate(t *testing.T) {
	// 10 per 5 ms wait: 2,000 a second, 200 per 100 ms window.
	t0 := time.Unix(1_000_000, 0)
	m := PerWait(10, 5*time.Millisecond)
	if m.Busy(t0) {
		t.Fatal("a meter that counted nothing is busy")
	}
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	// 199 events in the first window: one short.
	for i := range 199 {
		m.Count(at(float64(i) * 0.5))
	}
	if m.Busy(at(99.5)) {
		t.Fatal("199 events in a window of 100 ms read busy, want 200 needed")
	}
	m.Count(at(99.6))
	if !m.Busy(at(99.7)) {
		t.Fatal("200 events in a window of 100 ms do not read busy")
	}
	// The next window: its own first event rolls the 200 into prev.
	m.Count(at(150))
	if !m.Busy(at(180)) {
		t.Fatal("the window after a busy one does not read busy")
	}
	// Two windows after the last one began, nothing counted: quiet.
	if m.Busy(at(350)) {
		t.Fatal("a stream quiet for two windows reads busy")
	}
	// One event after a long quiet span: prev is not the old busy window.
	m.Count(at(1000))
	if m.Busy(at(1001)) {
		t.Fatal("one event after a quiet second reads busy")
	}
}

// TestPerWaitWindow: the window is at least MinWindow, the need scaled to
// it; a zero wait needs one event.
func TestPerWaitWindow(t *testing.T) {
	for _, c := range []struct {
		worth  int
		wait   time.Duration
		window time.Duration
		need   int
	}{
		{10, 5 * time.Millisecond, 100 * time.Millisecond, 200},
		{6, time.Millisecond, 100 * time.Millisecond, 600},
		{10, 500 * time.Millisecond, 500 * time.Millisecond, 10},
		{6, 0, 100 * time.Millisecond, 1},
	} {
		m := PerWait(c.worth, c.wait)
		if m.window != c.window || m.need != c.need {
			t.Errorf("PerWait(%d, %s): window %s need %d, want %s and %d", c.worth, c.wait, m.window, m.need, c.window, c.need)
		}
	}
}
