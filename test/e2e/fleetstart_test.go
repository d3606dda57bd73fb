package e2e

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// hangingServer accepts TCP connections and never answers on them, until
// the test ends: a PostgreSQL that hangs at connect.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestFleetHungDatabaseOthersStream: the first pipeline of the file
// (orders) connects to a PostgreSQL that accepts the connection and never
// answers. The pipelines after it start all the same: they stream and
// deliver their events, while /readyz names orders alone. A fleet that
// started its pipelines one after another, in the file's order, would
// wait on orders forever. And each streaming pipeline's connection that
// read its held slot position (opened while its replication connection
// was) is closed once read: none is left open beside the stream.
func TestFleetHungDatabaseOthersStream(t *testing.T) {
	t.Parallel()
	addr := hangingServer(t)
	hang := func(s string) string {
		i := strings.Index(s, "    pg-url-file: ")
		j := i + strings.Index(s[i:], "\n")
		return s[:i] + "    pg-url: postgres://walrelay@" + addr + "/orders?sslmode=disable" + s[j:]
	}
	p, envs := startFleetWith(t, hang)
	others := envs[1:]
	for _, e := range others {
		waitStreaming(t, p, e)
	}
	rolledBack := write(t, 100, others...)
	for _, e := range others {
		readBack(t, e, rolledBack, false)
	}
	for _, e := range others {
		harness.WaitFor(t, time.Minute, "pipeline "+e.name+"'s connection that read the held slot position to close", func() bool {
			var n int
			if err := e.Bed.QueryRow(t, e.DSN, `SELECT count(*)::int FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%slot_name = $1 AND active_pid = $2%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
	}
	code, body := p.Get("/readyz")
	if code != 503 || !strings.Contains(body, "orders: ") || strings.Contains(body, "billing: ") || strings.Contains(body, "shipping: ") {
		t.Errorf("/readyz: %d %s, want 503 naming orders alone", code, body)
	}
	if p.Exited() {
		t.Fatalf("walrelay exited")
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestFleetSharedMarkersSlotGone: the pipelines of a fleet share one
// marker store and read the marker topic once, before they start. The
// delivery rule that read serves holds as with a read per pipeline: after
// a first run, billing's slot is dropped and billing may create slots
// (create: true); on the second run billing refuses to create it again
// (its marker says walrelay streamed from it: events would be skipped)
// and stops, the slot is not created, and orders and shipping deliver
// their new events.
func TestFleetSharedMarkersSlotGone(t *testing.T) {
	t.Parallel()
	var text string
	p, envs := startFleetWith(t, func(s string) string { text = s; return s })
	for _, e := range envs {
		waitStreaming(t, p, e)
	}
	rolledBack := write(t, 50, envs...)
	for _, e := range envs {
		readBack(t, e, rolledBack, false)
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	if got := strings.Count(p.Log(), `"msg":"marker store shared","pipelines":3`); got != 1 {
		t.Errorf("log: %d lines of one marker store shared by the 3 pipelines, want 1:\n%s", got, p.Log())
	}
	billing := envs[1]
	billing.Bed.Exec(t, billing.DSN, "SELECT pg_drop_replication_slot($1)", billing.Slot)

	file := e2etest.WriteFile(t, t.TempDir(), "fleet.yaml", []byte(withSettings("billing", "create: true")(text)))
	q := &e2etest.Proc{Relay: harness.StartProcess(t, e2etest.Bin, nil, []string{"run", "--config", file}), T: t, Env: envs[0].Env}
	harness.WaitFor(t, time.Minute, "pipeline billing to refuse its gone slot", func() bool {
		if q.Exited() {
			t.Fatalf("walrelay exited when one pipeline stopped")
		}
		return strings.Contains(q.Log(), `"pipeline":"billing"`) && strings.Contains(q.Log(), "replication slot gone")
	})
	if s := billing.Bed.Slot(t, billing.DSN, billing.Slot); s.Exists {
		t.Errorf("billing's slot was created again: %+v", s)
	}
	others := []*fleetEnv{envs[0], envs[2]}
	for _, e := range others {
		waitStreaming(t, q, e)
	}
	rolledBack = write(t, 50, others...)
	for _, e := range others {
		readBack(t, e, rolledBack, false)
	}
	if code := q.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
