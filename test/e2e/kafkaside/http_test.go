package kafkaside

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// openFDs counts the file descriptors process pid holds.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("read open files of walrelay: %v", err)
	}
	return len(ents)
}

// TestHTTPServerSheds: a real walrelay process with
// WALRELAY_HTTP_IDLE_TIMEOUT=1s and WALRELAY_HTTP_MAX_CONNECTIONS=32.
// A keep-alive connection left idle is closed by walrelay. Then 150 idle
// keep-alive clients and 150 slowloris clients (headers sent a byte at a
// time, never finished) at once: walrelay's open files (/proc/PID/fd) stay
// within the connection limit of what they were, and /readyz keeps
// answering 200 on new connections throughout.
func TestHTTPServerSheds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const maxConns = 32
	relay := e.StartEnv(t, []string{"WALRELAY_HTTP_IDLE_TIMEOUT=1s", fmt.Sprintf("WALRELAY_HTTP_MAX_CONNECTIONS=%d", maxConns)})
	relay.WaitStreaming()
	addr := relay.HTTPAddr()
	probe := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	readyz := func() error {
		resp, err := probe.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d %q", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	}
	deadline := time.Now().Add(time.Minute)
	for readyz() != nil {
		if time.Now().After(deadline) {
			t.Fatal("walrelay not ready within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	pid := relay.Pid()

	// 1. An idle keep-alive connection is closed after the idle timeout.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: walrelay\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("an idle keep-alive connection was not closed by walrelay (read: %v); want EOF after the 1s idle timeout", err)
	}
	conn.Close()

	// 2. Many idle and slow clients at once.
	base := openFDs(t, pid)
	const idle, slow = 150, 150
	var mu sync.Mutex
	var conns []net.Conn
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// N.B. the probes start once every attacker has dialed: until then a
	// newer connection may close a probe's that walrelay has not read a
	// request from yet (the newest connection wins, by design), which on a
	// busy machine happened while the 300 dials were still coming in.
	var dialing sync.WaitGroup
	dialing.Add(idle + slow)
	dial := func() net.Conn {
		defer dialing.Done()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return nil
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c
	}
	for i := 0; i < idle; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial()
			if c == nil {
				return
			}
			// One request, then nothing: the connection stays open for
			// the next one.
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: walrelay\r\n\r\n")
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			<-stop
		}()
	}
	for i := 0; i < slow; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial()
			if c == nil {
				return
			}
			fmt.Fprintf(c, "GET /readyz HTTP/1.1\r\nHost: walrelay\r\nX-Slow: ")
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte("a")); err != nil {
						return // walrelay closed it
					}
				}
			}
		}()
	}
	dialing.Wait()
	peak := base
	var probeErrs []string
	for i := 0; i < 20; i++ {
		time.Sleep(200 * time.Millisecond)
		peak = max(peak, openFDs(t, pid))
		if err := readyz(); err != nil {
			probeErrs = append(probeErrs, err.Error())
		}
	}
	close(stop)
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	n := len(conns)
	mu.Unlock()
	wg.Wait()
	t.Logf("%d attacking connections dialed; walrelay's open files: %d before, at most %d during", n, base, peak)
	if len(probeErrs) > 0 {
		t.Errorf("/readyz failed %d of 20 times while idle and slow clients were connected: %s", len(probeErrs), strings.Join(probeErrs, "; "))
	}
	// N.B. the limit, plus a few for walrelay's own connections to
	// PostgreSQL and Kafka, which may come and go meanwhile.
	if peak > base+maxConns+8 {
		t.Errorf("walrelay held %d open files with %d idle and slow clients connected, %d before: more than the %d connections --http-max-connections allows", peak, idle+slow, base, maxConns)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
