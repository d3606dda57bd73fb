package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Workload writes outbox transactions the way an application does: a
// business row and outbox rows in one transaction. Writers survive server
// restarts and cut connections: they reconnect and go on.
type Workload struct {
	Writers    int     // concurrent writers
	Events     int     // stop once this many outbox rows are committed; 0: until the context ends
	Aggregates int     // distinct aggregate ids
	MaxTxRows  int     // each transaction has 1..MaxTxRows outbox rows
	Rollback   float64 // share of transactions rolled back
	Business   float64 // share of transactions that also write the orders table
	Pause      time.Duration
	Pad        int // hex digits of random padding in each payload
	// Messages is the share of events emitted as logical decoding
	// messages (pg_logical_emit_message(true, 'outbox', ...) with
	// walrelay.emit's content) instead of outbox rows, mixed with them in
	// the same transactions. Each message's event is also written to
	// MessageLedger in its transaction: the committed truth, which
	// CommittedRows reads with the outbox. Call PrepareMessages first.
	Messages float64

	writeLog
}

// Prepare creates the per-aggregate sequence rows.
func (w *Workload) Prepare(t testing.TB, e *Env) {
	t.Helper()
	e.Bed.Exec(t, e.DSN, `INSERT INTO agg_seq (id) SELECT 'agg-' || i FROM generate_series(0, $1 - 1) i ON CONFLICT DO NOTHING`, w.Aggregates)
}

// MessageLedger is the table that records each event the workload emits as
// a message, in the message's transaction: walrelay never reads it (it is
// in no publication of walrelay's), the witness sees its commits.
const MessageLedger = "outbox_ledger"

// PrepareMessages creates MessageLedger, for a workload with Messages.
func (w *Workload) PrepareMessages(t testing.TB, e *Env) {
	t.Helper()
	e.Bed.Exec(t, e.DSN, `CREATE TABLE IF NOT EXISTS `+MessageLedger+` (LIKE outbox INCLUDING ALL)`)
}

// Start runs the workload in the background.
func (w *Workload) Start(e *Env) *Writing {
	return w.start(func(ctx context.Context) error { return w.Run(ctx, e) })
}

// Run writes until Events rows are committed or ctx ends.
func (w *Workload) Run(ctx context.Context, e *Env) error {
	w.init()
	return w.run(ctx, e, w.Writers, func(ctx context.Context, i uint64) error {
		return w.writer(ctx, e, mrand.New(mrand.NewPCG(i, uint64(time.Now().UnixNano()))))
	})
}

func (w *Workload) done(ctx context.Context) bool {
	return ctx.Err() != nil || (w.Events > 0 && w.committed.Load() >= int64(w.Events))
}

func (w *Workload) writer(ctx context.Context, e *Env, rng *mrand.Rand) error {
	return w.loop(ctx, e, w.Pause, w.done, func(ctx context.Context, conn *pgx.Conn) (txAttempt, error) {
		rows := 1 + rng.IntN(w.MaxTxRows)
		rollback := rng.Float64() < w.Rollback
		business := rng.Float64() < w.Business
		ids, err := w.tx(ctx, e, conn, rng, rows, rollback, business)
		return txAttempt{ids: ids, rows: rows, rollback: rollback}, err
	})
}

func (w *Workload) tx(ctx context.Context, e *Env, conn *pgx.Conn, rng *mrand.Rand, rows int, rollback, business bool) ([]string, error) {
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
		ids[i] = NewUUID()
		sql := insertEvent
		if w.Messages > 0 && rng.Float64() < w.Messages {
			sql = emitEvent
		}
		_, err := tx.Exec(ctx, sql, ids[i], e.AggType(k), agg, "OrderCreated", i, pad(w.Pad))
		if err != nil {
			return ids, err
		}
	}
	if rollback {
		return ids, tx.Rollback(ctx)
	}
	return ids, tx.Commit(ctx)
}

// insertEvent writes one event as an outbox row.
//
// N.B. the row lock on agg_seq orders an aggregate's events by commit: a
// later transaction waits for it, and a rollback gives its numbers back.
const insertEvent = `WITH s AS (UPDATE agg_seq SET seq = seq + 1 WHERE id = $3 RETURNING seq)
	INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
	SELECT $1, $2, $3, $4, ` + eventPayload + ` FROM s`

// emitEvent emits one event as a transactional message whose content is
// walrelay.emit's (the outbox columns as jsonb), recording it in
// MessageLedger, under the same agg_seq lock.
const emitEvent = `WITH s AS (UPDATE agg_seq SET seq = seq + 1 WHERE id = $3 RETURNING seq),
	l AS (INSERT INTO ` + MessageLedger + ` (id, aggregatetype, aggregateid, type, payload)
		SELECT $1, $2, $3, $4, ` + eventPayload + ` FROM s RETURNING *)
	SELECT pg_logical_emit_message(true, 'outbox', jsonb_build_object('id', l.id, 'aggregatetype', l.aggregatetype,
		'aggregateid', l.aggregateid, 'type', l.type, 'payload', l.payload)::text) FROM l`

const eventPayload = `jsonb_build_object('seq', s.seq, 'agg', $3::text, 'xid', txid_current(),
		'note', 'ünïcødé ✓ "quoted"', 'nested', jsonb_build_object('n', $5::int, 'list', jsonb_build_array(1, 2.5, null, true)),
		'pad', $6::text)`

func pad(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
