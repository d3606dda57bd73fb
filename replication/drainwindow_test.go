package replication

import (
	"testing"
	"time"
)

// TestPaceFollowsTheWindow: reads that find the window full shorten the
// paced wait down to drainMinWait; reads that do not lengthen it, by
// drainWaitStep each, up to drainMaxWait.
func TestPaceFollowsTheWindow(t *testing.T) {
	c := &coalescingConn{window: windowNarrow, behind: true, dwait: time.Millisecond}
	const full = 126 << 10
	c.pace(full, 0, 0)
	if c.dwait != 750*time.Microsecond {
		t.Fatalf("after a full read: wait %s, want 750µs", c.dwait)
	}
	for range 20 {
		c.pace(full, 0, 0)
	}
	if c.dwait != drainMinWait {
		t.Fatalf("after full reads: wait %s, want the floor %s", c.dwait, drainMinWait)
	}
	c.pace(full/2, 0, 0)
	if c.dwait != drainMinWait+drainWaitStep {
		t.Fatalf("after a half-window read: wait %s, want %s", c.dwait, drainMinWait+drainWaitStep)
	}
	for range 100 {
		c.pace(full/2, 0, 0)
	}
	if c.dwait != drainMaxWait {
		t.Fatalf("after short reads: wait %s, want the cap %s", c.dwait, drainMaxWait)
	}
	// N.B. "full" is relative to the largest read: three quarters of it.
	c.pace(full*3/4, 0, 0)
	if c.dwait != drainMaxWait*3/4 {
		t.Fatalf("after a read of 3/4 of the largest: wait %s, want %s", c.dwait, drainMaxWait*3/4)
	}
	// N.B. against the window the kernel announces when it says: a read
	// of a window shrunk under the largest read counts as full.
	c.pace(full/2, full/2, 0)
	if c.dwait != drainMaxWait*3/4*3/4 {
		t.Fatalf("after a read of a whole window shrunk to half the largest read: wait %s, want %s", c.dwait, drainMaxWait*3/4*3/4)
	}
	// N.B. and in whole segments once the window holds two: a sender
	// holds back a segment the window has no room for.
	c.pace(131<<10, 182<<10, 64<<10)
	if c.dwait != drainMaxWait*3/4*3/4*3/4 {
		t.Fatalf("after a read of two 64 KiB segments of a 182 KiB window: wait %s, want %s", c.dwait, drainMaxWait*3/4*3/4*3/4)
	}
	c.pace(90<<10, 126<<10, 64<<10)
	if c.dwait != drainMaxWait*3/4*3/4*3/4+drainWaitStep {
		t.Fatalf("after a read of 90 KiB of a 126 KiB window (under two segments): wait %s, want %s", c.dwait, drainMaxWait*3/4*3/4*3/4+drainWaitStep)
	}
	c.behind = false
	if c.paced() {
		t.Fatal("paced while not behind: a live stream waits --pg-read-wait, not the drain's wait")
	}
}
