package replication

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/rate"
)

// coalescingConn waits a little before reading again after a read that
// emptied the socket.
//
// N.B. a walsender that finds its client always waiting sends each message
// on its own: every message then costs the server a send and a wake-up of
// the client, and the client a read. While a backlog drains this doubles the
// walsender's CPU (measured: 36 s instead of 18 s per million single-row
// transactions) and makes it, not walrelay, the bottleneck. Waiting readWait
// after a short read lets messages pile up in the socket buffer, so reads
// return many messages and the server writes in larger chunks. An idle
// stream is not affected (the next read blocks as before); a live one gains
// at most readWait of latency.
//
// N.B. only while messages come fast enough for a wait to gather
// waitWorth of them (busy, counted by the stream per message). At 1,000
// single-row transactions a second, waiting after every read put p50
// commit-to-consumer at 1.9-2.8 ms against 1.1-1.7 reading at once (four
// alternated runs each, 2 cores with PostgreSQL and Kafka); reading at once
// costs about 0.09 of a core more there (walrelay, the walsender and the
// broker: more and smaller produce requests).
//
// N.B. and while the stream is behind: a transaction sent backlogLag or
// more after its commit (a backlog drains). Ten pipelines of one process
// draining at once on two cores each got 1,700 single-row transactions a
// second in a make-test-loaded fleet drain, under waitWorth, and read every
// message on its own; a stream that far behind gains nothing from reading
// at once.
//
// It also reads the socket in chunks of readBytes into a buffer of its own.
//
// N.B. pgconn reads 8 KiB at a time (its buffer's size); a backlog then
// costs a read syscall per 8 KiB, about 16 single-row transactions. One read
// per readBytes returns what the socket holds after a wait in one call.
type coalescingConn struct {
	net.Conn
	raw     syscall.RawConn // of the TCP socket; nil when there is none
	wait    time.Duration
	drained bool                // the last read of the socket returned less than asked for
	busy    rate.Meter          // messages received, counted by Count
	behind  bool                // the last transaction began backlogLag or more after its commit (Lag)
	sleep   func(time.Duration) // time.Sleep unless a test counts the waits
	buf     []byte
	r, w    int // buf[r:w] is read from the socket and not yet returned

	window  windowState   // the drain window (drainwindow.go)
	dwait   time.Duration // the wait while it is narrow and the stream behind
	maxRead int           // the largest read since it was narrowed

	reads atomic.Uint64 // reads of the socket, for the stream's clock (clock.go)
}

// waitWorth is how many messages must arrive per wait for reads to wait:
// with --pg-read-wait 1ms, 6,000 a second, 2,000 single-row transactions
// (a Begin, an Insert and a Commit each), the rate above which the Kafka
// linger batches too.
const waitWorth = 6

// Count counts a message received, for the decision to wait.
func (c *coalescingConn) Count(now time.Time) { c.busy.Count(now) }

// backlogLag is how long after its commit a transaction must be sent for
// the stream to count as draining a backlog.
const backlogLag = 100 * time.Millisecond

// Lag tells how long after its commit the walsender sent the last
// transaction's Begin, for the decision to wait.
func (c *coalescingConn) Lag(d time.Duration) { c.behind = d >= backlogLag }

// readBytes is the size of coalescingConn's reads of the socket: twice
// the drain window, so that a read returns a full window in one call.
const readBytes = 256 << 10

// Buffered is the number of bytes read from the socket and not yet returned.
func (c *coalescingConn) Buffered() int { return c.w - c.r }

// quietLowat is the socket's receive low-water mark while the reader waits:
// arriving data does not wake the process until this much is queued.
//
// N.B. the Go runtime polls every socket: without it, each message arriving
// during the wait wakes a thread blocked in epoll_wait for nothing, which
// costs what the wait saves. Reads never block on it: a non-blocking read
// returns whatever is queued, and the mark is back at 1 before the next read.
const quietLowat = 256 << 10

func (c *coalescingConn) Read(p []byte) (int, error) {
	if c.r < c.w {
		n := copy(p, c.buf[c.r:c.w])
		c.r += n
		return n, nil
	}
	if c.buf == nil {
		c.buf = make([]byte, readBytes)
	}
	if c.behind && c.window == windowUntried && c.wait > 0 {
		c.narrow()
	}
	if c.drained && c.wait > 0 && (c.behind || c.busy.Busy(time.Now())) {
		c.drained = false
		quiet := c.setLowat(quietLowat) == nil
		w := c.wait
		if c.paced() {
			w = c.dwait
		}
		if c.sleep != nil {
			c.sleep(w)
		} else {
			time.Sleep(w)
		}
		if quiet {
			// N.B. a mark left high would stall every read that blocks.
			if err := c.setLowat(1); err != nil {
				return 0, fmt.Errorf("reset SO_RCVLOWAT: %w", err)
			}
		}
	}
	// N.B. a caller asking for more than the buffer holds reads straight
	// into its own slice.
	direct := len(p) >= len(c.buf)
	dst := c.buf
	if direct {
		dst = p
	}
	n, err := c.Conn.Read(dst)
	c.reads.Add(1)
	c.drained = err == nil && n > 0 && n < len(dst)
	if err == nil && n > 0 && c.paced() {
		window, mss := c.rcvWindow()
		c.pace(n, window, mss)
	}
	if direct {
		return n, err
	}
	c.w = n
	c.r = copy(p, c.buf[:n])
	return c.r, err
}

// coalesceReads wraps the connections pc dials in a coalescingConn (which
// waits only when wait > 0, only over TCP, and only while the stream is
// busy) and passes each to dialed.
func coalesceReads(pc *pgconn.Config, wait time.Duration, dialed func(*coalescingConn)) {
	dial := pc.DialFunc
	pc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		w := wait
		if _, ok := c.(*net.TCPConn); !ok {
			// N.B. over a Unix socket what the walsender writes during
			// a wait has only its send buffer to go to (208 KiB on the
			// bench machine, each small write counted with its
			// overhead), not a TCP receive window: it blocks within the
			// wait. A million-row drain took 24-25 s with --pg-read-wait
			// 1ms against 12.5-13 s reading at once
			// (bench/results/2026-12-05-vm-unix-socket.md).
			w = 0
		}
		cc := &coalescingConn{Conn: c, wait: w, busy: rate.PerWait(waitWorth, w)}
		if dialed != nil {
			dialed(cc)
		}
		if sc, ok := c.(syscall.Conn); ok {
			if raw, err := sc.SyscallConn(); err == nil {
				cc.raw = raw
			}
		}
		return cc, nil
	}
}
