package pipeline

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// TestCommitTimesBefore: the marker's commit time is that of a sampled
// transaction at or before the confirmed position, never of a later one.
func TestCommitTimesBefore(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	var c commitTimes
	if got := c.before(100); !got.IsZero() {
		t.Fatalf("nothing observed: before = %s, want zero", got)
	}
	c.observe(100, t0)
	c.observe(150, t0.Add(500*time.Millisecond)) // within a second: not sampled
	c.observe(200, t0.Add(2*time.Second))
	c.observe(300, t0.Add(4*time.Second))
	for _, tc := range []struct {
		confirmed uint64
		want      time.Time
	}{
		{99, time.Time{}},
		{100, t0},
		{250, t0.Add(2 * time.Second)},
		{300, t0.Add(4 * time.Second)},
		{1000, t0.Add(4 * time.Second)},
	} {
		var fresh commitTimes
		fresh.samples, fresh.next = c.samples, c.next
		if got := fresh.before(pglogrepl.LSN(tc.confirmed)); !got.Equal(tc.want) {
			t.Errorf("before(%d) = %s, want %s", tc.confirmed, got, tc.want)
		}
	}
}
