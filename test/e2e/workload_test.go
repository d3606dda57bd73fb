package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// workload writes outbox transactions the way an application does: a
// business row and outbox rows in one transaction.
type workload struct {
	Writers    int     // concurrent writers
	Events     int     // stop once this many outbox rows are committed
	Aggregates int     // distinct aggregate ids
	MaxTxRows  int     // each transaction has 1..MaxTxRows outbox rows
	Rollback   float64 // share of transactions rolled back
	Business   float64 // share of transactions that also write the orders table
	Pause      time.Duration

	committed  atomic.Int64
	mu         sync.Mutex
	rolledBack map[string]bool
}

// aggType is the aggregate type of aggregate k: two types, so two topics.
func (e *env) aggType(k int) string {
	if k%2 == 0 {
		return e.prefix + "_order"
	}
	return e.prefix + "_customer"
}

// prepare creates the per-aggregate sequence rows.
func (w *workload) prepare(t *testing.T, e *env) {
	t.Helper()
	e.bed.Exec(t, e.dsn, `INSERT INTO agg_seq (id) SELECT 'agg-' || i FROM generate_series(0, $1 - 1) i ON CONFLICT DO NOTHING`, w.Aggregates)
}

// run writes until Events rows are committed or ctx ends.
func (w *workload) run(ctx context.Context, t *testing.T, e *env) error {
	w.rolledBack = map[string]bool{}
	errs := make(chan error, w.Writers)
	var wg sync.WaitGroup
	for i := 0; i < w.Writers; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			errs <- w.writer(ctx, e, rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano()))))
		}(uint64(i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *workload) writer(ctx context.Context, e *env, rng *rand.Rand) error {
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for w.committed.Load() < int64(w.Events) {
		if ctx.Err() != nil {
			return nil
		}
		rows := 1 + rng.IntN(w.MaxTxRows)
		rollback := rng.Float64() < w.Rollback
		business := rng.Float64() < w.Business
		ids, err := w.tx(ctx, e, conn, rng, rows, rollback, business)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") {
			// Deadlock between aggregates locked in different orders: the
			// transaction rolled back; an application would retry it.
			rollback = true
		} else if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if rollback {
			w.mu.Lock()
			for _, id := range ids {
				w.rolledBack[id] = true
			}
			w.mu.Unlock()
		} else {
			w.committed.Add(int64(rows))
		}
		if w.Pause > 0 {
			time.Sleep(w.Pause)
		}
	}
	return nil
}

func (w *workload) tx(ctx context.Context, e *env, conn *pgx.Conn, rng *rand.Rand, rows int, rollback, business bool) ([]string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	if business {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (customer, total, note) VALUES ($1, $2, 'business row')`, fmt.Sprint("c", rng.IntN(1000)), rng.IntN(10000)); err != nil {
			return nil, err
		}
	}
	ids := make([]string, rows)
	// Aggregates in ascending order: transactions lock agg_seq rows in one
	// order and never deadlock.
	ks := make([]int, rows)
	for i := range ks {
		ks[i] = rng.IntN(w.Aggregates)
	}
	slices.Sort(ks)
	for i := range ids {
		k := ks[i]
		agg := fmt.Sprintf("agg-%d", k)
		ids[i] = newUUID()
		// N.B. the row lock on agg_seq orders an aggregate's events by commit:
		// a later transaction waits for it, and a rollback gives its numbers back.
		_, err := tx.Exec(ctx, `WITH s AS (UPDATE agg_seq SET seq = seq + 1 WHERE id = $3 RETURNING seq)
			INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
			SELECT $1, $2, $3, $4, jsonb_build_object('seq', s.seq, 'agg', $3::text, 'xid', txid_current(),
				'note', 'ünïcødé ✓ "quoted"', 'nested', jsonb_build_object('n', $5::int, 'list', jsonb_build_array(1, 2.5, null, true)))
			FROM s`, ids[i], e.aggType(k), agg, "OrderCreated", i)
		if err != nil {
			return nil, err
		}
	}
	if rollback {
		return ids, tx.Rollback(ctx)
	}
	return ids, tx.Commit(ctx)
}

// outboxRow is a committed outbox row as PostgreSQL renders it.
type outboxRow struct {
	ID, AggType, AggID, Type string
	Payload                  *string
}

func (e *env) committedRows(t *testing.T) map[string]outboxRow {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id::text, aggregatetype, aggregateid, type, payload::text FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]outboxRow{}
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.ID, &r.AggType, &r.AggID, &r.Type, &r.Payload); err != nil {
			t.Fatal(err)
		}
		out[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// verdict is what checkRecords found.
type verdict struct {
	Lost, Phantom, Duplicates, OrderViolations, FormatErrors int
}

// checkRecords compares what Kafka holds with the committed rows: each row
// exactly once (or at least once when dupsAllowed), nothing else, per key in
// commit order, byte-exact topic, key, value, headers and partition.
func checkRecords(t *testing.T, e *env, recs []*kgo.Record, rows map[string]outboxRow, rolledBack map[string]bool, partitions int, dupsAllowed bool) verdict {
	t.Helper()
	var v verdict
	seen := map[string]int{}
	report := func(format string, args ...any) {
		if v.FormatErrors+v.Phantom+v.OrderViolations < 20 {
			t.Errorf(format, args...)
		}
	}
	byKey := map[string][]*kgo.Record{}
	tsByXid := map[float64]time.Time{}
	for _, r := range recs {
		id, ok := header(r, "id")
		if !ok {
			v.FormatErrors++
			report("record at %s[%d]@%d has no id header", r.Topic, r.Partition, r.Offset)
			continue
		}
		seen[id]++
		row, ok := rows[id]
		if !ok {
			v.Phantom++
			report("record %s at %s[%d]@%d was never committed (rolled back: %v)", id, r.Topic, r.Partition, r.Offset, rolledBack[id])
			continue
		}
		if seen[id] > 1 {
			v.Duplicates++
		}
		if want := "outbox.event." + row.AggType; r.Topic != want {
			v.FormatErrors++
			report("record %s: topic %q, want %q", id, r.Topic, want)
		}
		if string(r.Key) != row.AggID {
			v.FormatErrors++
			report("record %s: key %q, want %q", id, r.Key, row.AggID)
		}
		if row.Payload == nil && r.Value != nil || row.Payload != nil && string(r.Value) != *row.Payload {
			v.FormatErrors++
			report("record %s: value %q, want %v", id, r.Value, row.Payload)
		}
		if et, _ := header(r, "eventType"); et != row.Type || len(r.Headers) != 2 || r.Headers[0].Key != "id" {
			v.FormatErrors++
			report("record %s: headers %v, want id then eventType=%s", id, r.Headers, row.Type)
		}
		if want := javaPartition(r.Key, partitions); r.Partition != want {
			v.FormatErrors++
			report("record %s: partition %d, Kafka's murmur2 partitioner gives %d", id, r.Partition, want)
		}
		byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
		if row.Payload != nil {
			var p struct {
				Xid float64 `json:"xid"`
			}
			if json.Unmarshal(r.Value, &p) == nil && p.Xid != 0 {
				if ts, ok := tsByXid[p.Xid]; ok && !ts.Equal(r.Timestamp) {
					v.FormatErrors++
					report("record %s: timestamp %s differs from its transaction's %s", id, r.Timestamp, ts)
				}
				tsByXid[p.Xid] = r.Timestamp
			}
		}
	}
	for id := range rows {
		if seen[id] == 0 {
			v.Lost++
			if v.Lost <= 20 {
				t.Errorf("committed row %s never reached Kafka", id)
			}
		}
	}
	// Per key, the first occurrence of each event must follow commit order:
	// seq 1, 2, 3, ... (records of one key share a partition: offset order).
	for key, rs := range byKey {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		next := int64(1)
		for _, r := range rs {
			var p struct {
				Seq int64 `json:"seq"`
			}
			if err := json.Unmarshal(r.Value, &p); err != nil || p.Seq == 0 {
				continue
			}
			switch {
			case p.Seq == next:
				next++
			case p.Seq < next:
				// a duplicate of an earlier event
			default:
				v.OrderViolations++
				report("key %s: seq %d at offset %d before seq %d", key, p.Seq, r.Offset, next)
				next = p.Seq + 1
			}
		}
	}
	if !dupsAllowed && v.Duplicates > 0 {
		t.Errorf("%d duplicate records", v.Duplicates)
	}
	if v.Lost+v.Phantom+v.OrderViolations+v.FormatErrors > 0 {
		t.Errorf("lost %d, phantom %d, order violations %d, format errors %d", v.Lost, v.Phantom, v.OrderViolations, v.FormatErrors)
	}
	return v
}
