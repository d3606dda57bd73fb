package replication

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/rate"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	var d net.Dialer
	return connPair(t, "tcp", "127.0.0.1:0", d.DialContext)
}

// connPair listens on addr and returns both ends of a connection that dial
// makes to it; both are closed when the test ends.
func connPair(t *testing.T, network, addr string, dial func(context.Context, string, string) (net.Conn, error)) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = dial(context.Background(), network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func coalescing(t *testing.T, c net.Conn) *coalescingConn {
	t.Helper()
	cc := &coalescingConn{Conn: c, wait: time.Millisecond, busy: rate.PerWait(waitWorth, time.Millisecond)}
	busyStream(cc)
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	cc.raw = raw
	return cc
}

// TestCoalescingConnDeliversEverything: the bytes read are the bytes
// written, in order, whatever the chunking.
func TestCoalescingConnDeliversEverything(t *testing.T) {
	client, server := tcpPair(t)
	cc := coalescing(t, client)
	var want bytes.Buffer
	go func() {
		for i := 0; i < 2000; i++ {
			msg := bytes.Repeat([]byte{byte(i)}, 1+i%700)
			server.Write(msg)
			if i%50 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		server.Close()
	}()
	for i := 0; i < 2000; i++ {
		want.Write(bytes.Repeat([]byte{byte(i)}, 1+i%700))
	}
	got, err := io.ReadAll(cc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read %d bytes, want %d, or in another order", len(got), want.Len())
	}
}

// busyStream counts as many messages on cc, now, as make its stream busy.
func busyStream(cc *coalescingConn) {
	now := time.Now()
	for range waitWorth * int(rate.MinWindow/cc.wait) {
		cc.Count(now)
	}
}

// TestCoalescingConnWaitsOnlyWhileBusy: after a read that emptied the
// socket, the next read waits only once messages have come at waitWorth a
// wait, or while the stream's transactions arrive backlogLag or more after
// their commit; a quiet stream's reads never wait.
func TestCoalescingConnWaitsOnlyWhileBusy(t *testing.T) {
	client, server := tcpPair(t)
	cc := coalescing(t, client)
	cc.busy = rate.PerWait(waitWorth, cc.wait) // quiet: nothing counted
	waits := 0
	cc.sleep = func(d time.Duration) {
		waits++
		time.Sleep(d)
	}
	buf := make([]byte, 4096)
	read := func(i int) {
		t.Helper()
		msg := fmt.Sprintf("message %d", i)
		if _, err := server.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		cc.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := cc.Read(buf)
		if err != nil || string(buf[:n]) != msg {
			t.Fatalf("read %d: %q, %v", i, buf[:n], err)
		}
		if !cc.drained {
			t.Fatalf("read %d: a read shorter than the buffer must count as having emptied the socket", i)
		}
	}
	// A quiet stream: one message a read, each counted.
	for i := range 20 {
		read(i)
		cc.Count(time.Now())
	}
	if waits != 0 {
		t.Fatalf("a quiet stream's reads waited %d times, want 0", waits)
	}
	// A quiet stream far behind its commits (a backlog draining slowly):
	// reads wait.
	cc.Lag(backlogLag)
	read(20)
	if waits != 1 {
		t.Fatalf("a stream %s behind its commits: a read after one that emptied the socket waited %d times, want 1", backlogLag, waits)
	}
	cc.Lag(backlogLag - time.Millisecond)
	read(21)
	if waits != 1 {
		t.Fatalf("a quiet stream caught up with its commits waited again (%d waits, want 1)", waits)
	}
	busyStream(cc)
	read(22)
	if waits != 2 {
		t.Fatalf("a busy stream's read after one that emptied the socket waited %d times, want 2", waits)
	}
}

// TestCoalescingConnDoesNotStallSmallMessages: after a short read and the
// wait, the low-water mark is back at 1, so a blocking read returns a single
// small message (a keepalive) instead of waiting for 256 KiB.
func TestCoalescingConnDoesNotStallSmallMessages(t *testing.T) {
	client, server := tcpPair(t)
	cc := coalescing(t, client)
	server.Write([]byte("first"))
	buf := make([]byte, 4096)
	n, err := cc.Read(buf)
	if err != nil || string(buf[:n]) != "first" {
		t.Fatalf("first read: %q, %v", buf[:n], err)
	}
	if !cc.drained {
		t.Fatal("a read shorter than the buffer must count as having emptied the socket")
	}
	go func() {
		time.Sleep(100 * time.Millisecond) // the next read blocks first
		server.Write([]byte("k"))
	}()
	cc.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err = cc.Read(buf)
	if err != nil || string(buf[:n]) != "k" {
		t.Fatalf("second read: %q, %v (SO_RCVLOWAT left high stalls small messages)", buf[:n], err)
	}
}

// countingConn counts the reads of the connection under it.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// TestCoalescingConnReadsTheSocketInLargeChunks: what the socket holds is
// read from it in one read of up to readBytes, though pgconn asks for 8 KiB
// at a time; the rest is served from the buffer, in order, and Buffered says
// how much is left.
func TestCoalescingConnReadsTheSocketInLargeChunks(t *testing.T) {
	client, server := tcpPair(t)
	counted := &countingConn{Conn: client}
	cc := &coalescingConn{Conn: counted}
	const total = 96 << 10
	want := make([]byte, total)
	for i := range want {
		want[i] = byte(i % 251)
	}
	// 400-byte messages, the size of a single-row transaction's parts.
	for off := 0; off < total; off += 400 {
		if _, err := server.Write(want[off:min(off+400, total)]); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the socket holds all of it: one 1-byte read, then the
	// rest is in the buffer once a read of it returns everything.
	var got []byte
	p := make([]byte, 8192)
	cc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(got) < total {
		n, err := cc.Read(p)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		got = append(got, p[:n]...)
		if n > 0 && cc.Buffered() == 0 && len(got) < total {
			// The next read goes to the socket.
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ from those written, or come in another order")
	}
	calls := total / len(p)
	if counted.reads >= calls {
		t.Errorf("%d reads of the socket for %d reads of 8 KiB: want fewer, the socket read in chunks of %d", counted.reads, calls, readBytes)
	}
	t.Logf("%d reads of the socket for %d bytes read 8 KiB at a time", counted.reads, total)
}

// TestCoalesceReadsWaitsOnlyOverTCP: the connections coalesceReads dials
// wait after a read that emptied the socket of a busy stream over TCP, and
// never over a Unix socket, whose small send buffer would block the
// walsender within the wait.
func TestCoalesceReadsWaitsOnlyOverTCP(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), ".s.PGSQL.5432")
			}
			var d net.Dialer
			pc := &pgconn.Config{DialFunc: d.DialContext}
			var cc *coalescingConn
			coalesceReads(pc, time.Millisecond, func(c *coalescingConn) { cc = c })
			client, server := connPair(t, network, addr, pc.DialFunc)
			waits := 0
			cc.sleep = func(d time.Duration) {
				waits++
				time.Sleep(d)
			}
			// A busy stream: far more messages than any wait needs.
			now := time.Now()
			for range 100_000 {
				cc.Count(now)
			}
			buf := make([]byte, 4096)
			for i := range 2 {
				msg := fmt.Sprintf("message %d", i)
				if _, err := server.Write([]byte(msg)); err != nil {
					t.Fatal(err)
				}
				client.SetReadDeadline(time.Now().Add(30 * time.Second))
				n, err := client.Read(buf)
				if err != nil || string(buf[:n]) != msg {
					t.Fatalf("read %d: %q, %v", i, buf[:n], err)
				}
			}
			want := map[string]int{"tcp": 1, "unix": 0}[network]
			if waits != want {
				t.Errorf("the second read of a busy stream over %s waited %d times, want %d", network, waits, want)
			}
		})
	}
}
