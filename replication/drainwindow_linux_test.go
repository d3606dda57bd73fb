package replication

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestNarrowOnLoopback: over loopback TCP (a path far under drainMaxRTT)
// narrow fixes SO_RCVBUF at drainRcvBuf (Linux reports it doubled); a
// connection without a socket keeps the kernel's buffer.
func TestNarrowOnLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			var b [1]byte
			c.Read(b[:])
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rcvbuf := func() int {
		var n int
		raw.Control(func(fd uintptr) { n, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := rcvbuf()
	c := &coalescingConn{Conn: conn, raw: raw, wait: time.Millisecond}
	c.narrow()
	if c.window != windowNarrow || c.dwait != time.Millisecond {
		t.Fatalf("loopback: window state %d, wait %s; want narrow (%d), starting at --pg-read-wait 1ms", c.window, c.dwait, windowNarrow)
	}
	if got := rcvbuf(); got != 2*drainRcvBuf {
		t.Fatalf("loopback: SO_RCVBUF %d after narrow (%d before), want %d", got, before, 2*drainRcvBuf)
	}

	none := &coalescingConn{wait: time.Millisecond}
	none.narrow()
	if none.window != windowKept {
		t.Fatalf("no socket: window state %d, want kept (%d)", none.window, windowKept)
	}
}
