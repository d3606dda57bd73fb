package fault

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// tracedRelay starts the bed's OpenTelemetry Collector and a walrelay
// exporting its spans there as service, over an outbox with Debezium's
// tracingspancontext column; env are more OTEL_* settings (name=value).
func tracedRelay(t *testing.T, service string, env ...string) (*testbed.Collector, *harness.Env, *harness.Relay) {
	t.Helper()
	col := testbed.StartCollector(t)
	e := harness.NewEnv(t, relayBin)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN tracingspancontext text`)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+col.HTTP)
	t.Setenv("OTEL_SERVICE_NAME", service)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	relay := e.StartRelay(t)
	relay.WaitStreaming()
	return col, e, relay
}

// tracedWriter writes single-event transactions, each with a sampled
// context of a trace of its own in the tracingspancontext column.
type tracedWriter struct {
	t     *testing.T
	e     *harness.Env
	conn  *pgx.Conn
	order []string                 // event ids in commit order
	trace map[string]string        // event id -> its writer's trace id
	upper map[string]pglogrepl.LSN // event id -> a position at or past its commit's end
}

func newTracedWriter(t *testing.T, e *harness.Env) *tracedWriter {
	t.Helper()
	conn := harness.Connect(t, e.DSN)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &tracedWriter{t: t, e: e, conn: conn, trace: map[string]string{}, upper: map[string]pglogrepl.LSN{}}
}

// write commits n events, one a transaction, and returns the position
// after the last.
func (w *tracedWriter) write(n int) pglogrepl.LSN {
	w.t.Helper()
	ctx := context.Background()
	var at pglogrepl.LSN
	for range n {
		id := harness.NewUUID()
		tr := strings.ReplaceAll(harness.NewUUID(), "-", "")
		sp := strings.ReplaceAll(harness.NewUUID(), "-", "")[:16]
		k := len(w.order)
		if _, err := w.conn.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
			VALUES ($1, $2, $3, 'Changed', '{}'::jsonb, $4)`, id, w.e.AggType(k), fmt.Sprintf("agg-%d", k%20), "traceparent=00-"+tr+"-"+sp+"-01"); err != nil {
			w.t.Fatal(err)
		}
		var lsn string
		if err := w.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
			w.t.Fatal(err)
		}
		var err error
		if at, err = pglogrepl.ParseLSN(lsn); err != nil {
			w.t.Fatal(err)
		}
		w.trace[id], w.upper[id] = tr, at
		w.order = append(w.order, id)
	}
	return at
}

// waitConfirmed waits until the slot is confirmed past at, failing if
// relay exits first.
func waitConfirmed(t *testing.T, e *harness.Env, relay *harness.Relay, at pglogrepl.LSN, what string) {
	t.Helper()
	harness.WaitFor(t, 3*time.Minute, what, func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited: %v", relay.Err())
		}
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= at
	})
}

// recordsOf reads e's topics to their end offsets and returns, for each
// event id, the "topic/partition/offset" of its records; it fails the
// test when an event of order was never relayed.
func recordsOf(t *testing.T, e *harness.Env, order []string) map[string]map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, _, err := testbed.ReadToEnd(ctx, e.Bed.Brokers(), e.Topics(), testbed.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[string]map[string]bool{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		if offsets[id] == nil {
			offsets[id] = map[string]bool{}
		}
		offsets[id][fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = true
	}
	lost := 0
	for _, id := range order {
		if offsets[id] == nil {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d events lost", lost, len(order))
	}
	return offsets
}
