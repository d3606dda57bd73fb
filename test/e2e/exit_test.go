package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// exitShutdownTimeout is the --shutdown-timeout of TestExitAfterStopped.
const exitShutdownTimeout = 5 * time.Second

// TestExitAfterStopped: after SIGTERM the process exits, with code 0,
// within --shutdown-timeout (docs/configuration.md: how long a stop waits
// for Kafka), the abort walrelay makes 5 s after it, and 3 s more, counted
// from its "stopping" line: idle, with a backlog draining, with a
// keep-alive client of /metrics connected, in exactly-once mode, and with
// Kafka gone silent just before the stop (the slot marker's last refresh
// and the clients' Close wait on it), in exactly-once mode too, and while a
// Kafka transaction's commit is unanswered (the committer holds the lock
// every Produce takes). A process still alive then is sent
// SIGQUIT, and the test shows its log since "stopping" and where its
// goroutines wait.
func TestExitAfterStopped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		writing  bool // a workload writes until the stop: a backlog drains
		scraper  bool // a keep-alive client polls /metrics through the stop
		eos      bool // --exactly-once: a Kafka transaction open at the stop
		isolated bool // Kafka stops answering just before the stop
		// commitHeld: Kafka stops answering while the committer (not a
		// Produce call) commits a Kafka transaction: its EndTxn is held.
		commitHeld bool
	}{
		{name: "idle"},
		{name: "backlog", writing: true},
		{name: "scraper", writing: true, scraper: true},
		{name: "exactly-once", writing: true, eos: true},
		{name: "kafka-gone", writing: true, isolated: true},
		{name: "exactly-once-kafka-gone", writing: true, eos: true, isolated: true},
		{name: "exactly-once-commit-unanswered", eos: true, isolated: true, commitHeld: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := e2etest.NewEnv(t)
			w := &harness.Workload{Writers: 4, Aggregates: 20, MaxTxRows: 20}
			w.Prepare(t, e.Env)
			c := e.Collect(t)
			if tc.eos {
				e.ExactlyOnce()
			}
			kafka := harness.NewKafkaProxy(t, e.Bed.Brokers()[0])
			relay := e.Start(t, "--brokers", kafka.Addr(), "--shutdown-timeout", exitShutdownTimeout.String())
			relay.WaitStreaming()
			var heldXid uint32 // the row whose Kafka transaction's commit is held
			if tc.writing {
				writing := w.Start(e.Env)
				defer writing.Stop()
				// N.B. records in Kafka: the sink holds a live producer
				// with batches in flight when the stop comes.
				c.WaitFor(200, 2*time.Minute)
			} else {
				var held <-chan struct{}
				if tc.commitHeld {
					// N.B. armed before the only row: no Produce call
					// follows it, so its Kafka transaction is committed
					// by the committer, whose commit is then held.
					var release func()
					held, release = kafka.HoldBefore(harness.KafkaEndTxn)
					defer release()
				}
				heldXid = e.ExecXid(t, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'agg-0', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))
				if held == nil {
					c.WaitFor(1, 2*time.Minute)
				} else {
					select {
					case <-held:
					case <-time.After(time.Minute):
						t.Fatal("walrelay sent no commit request (EndTxn) within a minute")
					}
				}
			}
			if tc.scraper {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go scrape(ctx, "http://"+relay.HTTPAddr()+"/metrics")
			}
			if tc.isolated {
				kafka.Isolate()
			}
			if err := syscall.Kill(relay.Pid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			harness.WaitFor(t, time.Minute, `walrelay's "stopping" line`, func() bool { return strings.Contains(relay.Log(), `"msg":"stopping","signal"`) })
			stopping := time.Now()
			// N.B. the shutdown timeout, then the abort walrelay makes 5 s
			// later (cmd/walrelay run.go), and 3 s to exit.
			bound := exitShutdownTimeout + 8*time.Second
			deadline := time.NewTimer(bound)
			defer deadline.Stop()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for !relay.Exited() {
				select {
				case <-tick.C:
					continue
				case <-deadline.C:
				}
				stopped := strings.Contains(relay.Log(), `"msg":"stopped"`)
				// The goroutine dump shows what the process waits on.
				_ = syscall.Kill(relay.Pid(), syscall.SIGQUIT)
				harness.WaitFor(t, 30*time.Second, "walrelay to exit on SIGQUIT", relay.Exited)
				t.Fatalf("walrelay still running %s after its \"stopping\" line (logged \"stopped\": %v; --shutdown-timeout %s); its log since:\n%s\nwhere it waited: %s",
					bound, stopped, exitShutdownTimeout, logSince(relay.Log(), `"msg":"stopping","signal"`), goroutines(relay.Log()))
			}
			if code := relay.Wait(time.Second); code != 0 {
				t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
			}
			if tc.commitHeld {
				// N.B. the slot is not confirmed past a row whose Kafka
				// transaction was never committed: the next walrelay
				// relays it.
				var rows int
				if err := e.Bed.QueryRow(t, e.DSN, `SELECT count(*)
					FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)
					WHERE xid = $3::text::xid AND get_byte(data, 0) = ascii('I')`, e.Slot, e.Pub, strconv.FormatUint(uint64(heldXid), 10)).Scan(&rows); err != nil {
					t.Fatal(err)
				}
				if rows != 1 {
					t.Errorf("the slot holds %d rows of transaction %d, whose Kafka commit never reached the broker: want 1 (not confirmed past it)", rows, heldXid)
				}
			}
			t.Logf("FIGURES case=%s exit_after_stopping=%s", tc.name, time.Since(stopping).Round(10*time.Millisecond))
		})
	}
}

// scrape GETs url every 100 ms on one keep-alive connection, as Prometheus
// does, until ctx ends.
func scrape(ctx context.Context, url string) {
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer cl.CloseIdleConnections()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := cl.Do(req); err == nil {
			var buf [4096]byte
			for {
				if _, err := resp.Body.Read(buf[:]); err != nil {
					break
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// logSince is log's JSON lines from the first that contains from.
func logSince(log, from string) string {
	i := strings.Index(log, from)
	if i < 0 {
		return ""
	}
	var out []string
	for _, l := range strings.Split(log[strings.LastIndex(log[:i], "\n")+1:], "\n") {
		if strings.HasPrefix(l, "{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

var goroutineRE = regexp.MustCompile(`(?s)\ngoroutine \d+ .*`)

// goroutines is the goroutine dump at the end of log (SIGQUIT's), without
// the runtime's own goroutines.
func goroutines(log string) string {
	dump := goroutineRE.FindString(log)
	if dump == "" {
		return "(no goroutine dump in the log)"
	}
	var keep []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "github.com/walrelay") || strings.Contains(g, "franz-go") || strings.Contains(g, "pgx") {
			keep = append(keep, g)
		}
	}
	return fmt.Sprintf("%d goroutines, %d of walrelay, franz-go or pgx:\n%s", strings.Count(dump, "\ngoroutine "), len(keep), strings.Join(keep, "\n\n"))
}
