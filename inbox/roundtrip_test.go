package inbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sentTracer lists what a pool's connections send, one entry a round trip:
// a statement on its own, or a batch (its statements pipelined).
type sentTracer struct {
	mu   sync.Mutex
	sent []string
}

func (s *sentTracer) add(x string) {
	s.mu.Lock()
	s.sent = append(s.sent, x)
	s.mu.Unlock()
}

func (s *sentTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(strings.Fields(d.SQL)[0])
	return ctx
}
func (*sentTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sentTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var qs []string
	for _, q := range d.Batch.QueuedQueries {
		qs = append(qs, strings.Fields(q.SQL)[0])
	}
	s.add("batch(" + strings.Join(qs, "+") + ")")
	return ctx
}
func (*sentTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*sentTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestTwoRoundTripsPerRecord: besides the Handler's own statements, a
// record costs the inbox two round trips to the database: BEGIN with the
// id insert (pipelined), and COMMIT. (Before: three, BEGIN on its own.)
func TestTwoRoundTripsPerRecord(t *testing.T) {
	f := newFixture(t, 1)
	const n = 20
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, rec("a", fmt.Sprintf("id-%d", i), i))
	}
	f.produce(t, recs...)
	pc, err := pgxpool.ParseConfig(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	tr := &sentTracer{}
	pc.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cfg := f.config(func(context.Context, pgx.Tx, *kgo.Record) error { return nil }) // no statements of its own
	cfg.Pool = pool
	a := start(t, cfg)
	waitFor(t, "the records applied", func() bool { return a.c.Stats().Applied == n })
	a.Stop(t)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	// N.B. the first is Run's check of the inbox table.
	if len(tr.sent) != 1+2*n {
		t.Fatalf("%d round trips for %d records, want 1 + 2 a record: %s", len(tr.sent), n, strings.Join(tr.sent, ", "))
	}
	for i := 1; i < len(tr.sent); i += 2 {
		if tr.sent[i] != "batch(begin+INSERT)" || tr.sent[i+1] != "commit" {
			t.Fatalf("round trips %d and %d: %s, %s; want batch(begin+INSERT), commit", i, i+1, tr.sent[i], tr.sent[i+1])
		}
	}
}
