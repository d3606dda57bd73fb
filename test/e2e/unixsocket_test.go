package e2e

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestUnixSocket: walrelay pointed at PostgreSQL's Unix socket (a --pg-url
// with host=/socket/directory, as on the database's own host) relays every
// committed event of a busy stream with no TCP connection to PostgreSQL,
// and the slot is confirmed past them. Over a Unix socket walrelay reads at
// once: its wait after a read (--pg-read-wait, for TCP) blocked the
// walsender on the socket's small send buffer and halved a drain's rate
// (bench/results/2026-12-05-vm-unix-socket.md).
func TestUnixSocket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := e.Bed.PGSocketDir()
	if dir == "" {
		t.Fatal("the test bed does not manage its PostgreSQL, so its Unix socket is unknown: run the suite under go run ./test/cmd/testbed")
	}
	u, err := url.Parse(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	q := u.Query()
	q.Set("host", dir)
	q.Set("port", port)
	u.Host, u.RawQuery = "", q.Encode()

	w := &harness.Workload{Writers: 2, Events: 6000, Aggregates: 50, MaxTxRows: 10, Rollback: 0.05}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t, "--pg-url", u.String())
	relay.WaitStreaming()
	peers, err := harness.TCPPeers(relay.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(peers, func(p string) bool { return strings.HasSuffix(p, ":"+port) }); i >= 0 {
		t.Fatalf("walrelay holds a TCP connection to PostgreSQL's port (%s, peers %v): it does not use the Unix socket", peers[i], peers)
	}
	if err := w.Run(t.Context(), e.Env); err != nil {
		t.Fatalf("workload: %v", err)
	}
	rows := e.CommittedRows(t)
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	c.WaitFor(len(rows), 2*time.Minute)
	harness.WaitFor(t, time.Minute, "confirmed_flush_lsn to pass the workload", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, w.RolledBack(), 3, false)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
