package replication

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
type coalescingConn struct {
	net.Conn
	raw     syscall.RawConn // of the TCP socket; nil when there is none
	wait    time.Duration
	drained bool // the last read returned less than asked for
}

// quietLowat is the socket's receive low-water mark while the reader waits:
// arriving data does not wake the process until this much is queued.
//
// N.B. the Go runtime polls every socket: without it, each message arriving
// during the wait wakes a thread blocked in epoll_wait for nothing, which
// costs what the wait saves. Reads never block on it: a non-blocking read
// returns whatever is queued, and the mark is back at 1 before the next read.
const quietLowat = 256 << 10

func (c *coalescingConn) Read(p []byte) (int, error) {
	if c.drained {
		c.drained = false
		quiet := c.setLowat(quietLowat) == nil
		time.Sleep(c.wait)
		if quiet {
			// N.B. a mark left high would stall every read that blocks.
			if err := c.setLowat(1); err != nil {
				return 0, fmt.Errorf("reset SO_RCVLOWAT: %w", err)
			}
		}
	}
	n, err := c.Conn.Read(p)
	c.drained = err == nil && n > 0 && n < len(p)
	return n, err
}

// coalesceReads wraps the connections pc dials in a coalescingConn.
func coalesceReads(pc *pgconn.Config, wait time.Duration) {
	if wait <= 0 {
		return
	}
	dial := pc.DialFunc
	pc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &coalescingConn{Conn: c, wait: wait}
		if sc, ok := c.(syscall.Conn); ok {
			if raw, err := sc.SyscallConn(); err == nil {
				cc.raw = raw
			}
		}
		return cc, nil
	}
}
