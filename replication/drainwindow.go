package replication

import "time"

// The drain window: while a backlog drains over a short TCP path, the
// socket's receive buffer is fixed at drainRcvBuf and the reads are paced
// so that each finds the window full.
//
// N.B. why (docs/performance.md, "The walsender's two costs"): a walsender
// calls send() once per protocol message. While its client keeps the TCP
// window open, each send transmits a segment of one message at once, and
// the walsender pays, in its own CPU time, for the transmit, the loopback's
// receive path and the reader's wake-up: 14-19 CPU s per million
// single-row transactions, which made it the bottleneck of a drain at
// 50,000-60,000 events/s. While the window is closed, each send appends to
// a segment still queued: 8.5-10 CPU s per million, and about twice the
// rate. Debezium, slower to read, kept the window closed and got the cheap
// mode every time; walrelay, fast enough to keep it open, got it by chance
// (bbr's pacing on loopback). With the kernel's autotuned buffer (2-5 MB
// in a drain) a reader would have to wait tens of milliseconds to let the
// window close; with drainRcvBuf (a window of about 126 KB on Linux) a
// read every few milliseconds finds it full, and the walsender keeps
// appending to queued segments meanwhile. A fixed window caps the rate at
// window / read interval, so the interval follows the window: shorter
// while reads find it full, longer while they do not (pace).
//
// N.B. only over a path of at most drainMaxRTT: a window is at most one
// round trip's data, and 126 KB a millisecond is 126 MB/s, above any
// walsender's rate; on a longer path the kernel's autotuning is kept. Set
// once, the buffer stays for the connection's life (Linux then stops
// autotuning it): a live stream after the drain needs far less.

// windowState is where a connection stands with the drain window.
type windowState uint8

const (
	windowUntried windowState = iota // not behind yet since it connected
	windowNarrow                     // the receive buffer is drainRcvBuf
	windowKept                       // the kernel's autotuning is kept
)

const (
	// drainRcvBuf is the SO_RCVBUF set for a drain (Linux doubles it for
	// its bookkeeping; the window it announces is about 126 KB).
	drainRcvBuf = 64 << 10
	// drainMaxRTT is the longest minimum round trip the window is
	// narrowed on.
	drainMaxRTT = time.Millisecond
	// drainMinWait and drainMaxWait bound the paced wait; drainWaitStep
	// is how much a read that did not find the window full lengthens it.
	drainMinWait  = 250 * time.Microsecond
	drainMaxWait  = 8 * time.Millisecond
	drainWaitStep = 250 * time.Microsecond
)

// narrow fixes the receive buffer for a drain, once, if the path is short.
func (c *coalescingConn) narrow() {
	c.window = windowKept
	if rtt, err := c.minRTT(); err != nil || rtt > drainMaxRTT {
		return
	}
	if c.setRcvBuf(drainRcvBuf) != nil {
		return
	}
	c.window, c.dwait = windowNarrow, c.wait
}

// paced reports whether the wait follows the window: it is narrow and the
// stream behind.
func (c *coalescingConn) paced() bool { return c.window == windowNarrow && c.behind }

// pace adapts the wait to a read of n bytes from a window of window bytes
// (the kernel's rcv_ssthresh; 0 when unknown: the largest read so far) and
// segments of up to mss bytes (rcv_mss; 0 when unknown): a read of at
// least 3/4 of what the sender can fill found the window full (the
// walsender was held back: read sooner); a smaller one did not (wait
// longer, so that the next does).
//
// N.B. the window, not the largest read: Linux shrinks the window when the
// buffer's memory runs short (many small segments), and a read measured
// against the larger window of before never counted as full again (a drain
// with the 64 KiB buffer crawled at 19,949 events/s once). And whole
// segments: a sender holds back a segment the window has no room for, so a
// window of 2.8 segments fills at two (with a 96 KiB buffer, reads of two
// loopback segments, 131 KB, of a 182 KB window waited the longest, and
// drains crawled at 26,000-37,000 events/s).
func (c *coalescingConn) pace(n, window, mss int) {
	c.maxRead = max(c.maxRead, n)
	if window <= 0 {
		window = c.maxRead
	}
	if mss > 0 && window >= 2*mss {
		window = window / mss * mss
	}
	if n >= window*3/4 {
		c.dwait = max(c.dwait*3/4, drainMinWait)
		return
	}
	c.dwait = min(c.dwait+drainWaitStep, drainMaxWait)
}
