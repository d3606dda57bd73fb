package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

	committed  atomic.Int64
	mu         sync.Mutex
	rolledBack map[string]bool
	unknown    map[string]bool // the connection broke: committed or not
	backends   backends
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

// Committed is the number of outbox rows whose commit succeeded.
func (w *Workload) Committed() int64 { return w.committed.Load() }

// RolledBack returns the ids of rows rolled back (phantom candidates).
func (w *Workload) RolledBack() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.rolledBack))
	for id := range w.rolledBack {
		out[id] = true
	}
	return out
}

// Unknown returns how many rows were in transactions whose connection broke
// before the outcome was known; the outbox table says which committed.
func (w *Workload) Unknown() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.unknown)
}

// Writing is a workload running in the background.
type Writing struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start runs the workload in the background.
func (w *Workload) Start(e *Env) *Writing {
	ctx, cancel := context.WithCancel(context.Background())
	wr := &Writing{cancel: cancel, done: make(chan struct{})}
	go func() {
		wr.err = w.Run(ctx, e)
		close(wr.done)
	}()
	return wr
}

// Wait waits until the workload has committed its Events and returns its
// error.
func (wr *Writing) Wait() error {
	<-wr.done
	return wr.err
}

// Stop ends the workload now and returns its error.
func (wr *Writing) Stop() error {
	wr.cancel()
	return wr.Wait()
}

// Done is closed when the workload has ended.
func (wr *Writing) Done() <-chan struct{} { return wr.done }

// Run writes until Events rows are committed or ctx ends.
func (w *Workload) Run(ctx context.Context, e *Env) error {
	w.mu.Lock()
	if w.rolledBack == nil {
		w.rolledBack, w.unknown = map[string]bool{}, map[string]bool{}
	}
	w.mu.Unlock()
	errs := make(chan error, w.Writers)
	var wg sync.WaitGroup
	for i := 0; i < w.Writers; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			errs <- w.writer(ctx, e, mrand.New(mrand.NewPCG(seed, uint64(time.Now().UnixNano()))))
		}(uint64(i))
	}
	wg.Wait()
	w.backends.await(e)
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// backends are the server processes of a workload's writers, ever.
type backends struct {
	mu   sync.Mutex
	pids []uint32
}

func (b *backends) opened(pid uint32) {
	b.mu.Lock()
	b.pids = append(b.pids, pid)
	b.mu.Unlock()
}

// await waits until the writers' server processes have ended. N.B. a
// writer stopped during its COMMIT closes its connection at once, but the
// server may still commit it: until its backend is gone, a transaction may
// yet appear (in the outbox, and in a Witness only after it).
func (b *backends) await(e *Env) {
	b.mu.Lock()
	pids := slices.Clone(b.pids)
	b.mu.Unlock()
	if len(pids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.DSN)
	if err != nil {
		return // the server is down: no backend of it commits
	}
	defer conn.Close(context.Background())
	for ctx.Err() == nil {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&n); err != nil || n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *Workload) done(ctx context.Context) bool {
	return ctx.Err() != nil || (w.Events > 0 && w.committed.Load() >= int64(w.Events))
}

// txOutcome is what became of a transaction a writer attempted.
type txOutcome int

const (
	txDone    txOutcome = iota // committed, or rolled back as planned
	txAborted                  // deadlock or serialization failure: rolled back; an application would retry it
	txStopped                  // the writer's context ended: outcome unknown, stop writing
	txUnknown                  // the connection (or the server) went away: outcome unknown, reconnect
	txFailed                   // the statement failed: a bug of the workload
)

// classify sorts the error of one attempted transaction.
func classify(ctx context.Context, conn *pgx.Conn, err error) txOutcome {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return txDone
	case errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001"):
		return txAborted
	case ctx.Err() != nil:
		return txStopped
	case brokenConn(conn, err):
		return txUnknown
	}
	return txFailed
}

// brokenConn reports whether err means the connection (or the server) went
// away rather than the statement failing.
func brokenConn(conn *pgx.Conn, err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 57P01 admin_shutdown and friends, 08xxx connection exceptions.
		return pgErr.Code[:2] == "57" || pgErr.Code[:2] == "08"
	}
	return conn.IsClosed() || !errors.Is(err, context.Canceled)
}

// writerConn is a writer's connection, opened again after it breaks; the
// writer fails after two minutes without one.
type writerConn struct {
	dsn       string
	conn      *pgx.Conn
	downSince time.Time
	opened    func(pid uint32) // each connection's server process
}

// get returns an open connection, or nil (and no error) when ctx ends.
func (c *writerConn) get(ctx context.Context) (*pgx.Conn, error) {
	for c.conn == nil || c.conn.IsClosed() {
		conn, err := pgx.Connect(ctx, c.dsn)
		if err == nil {
			c.conn, c.downSince = conn, time.Time{}
			if c.opened != nil {
				c.opened(conn.PgConn().PID())
			}
			break
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if c.downSince.IsZero() {
			c.downSince = time.Now()
		}
		if time.Since(c.downSince) > 2*time.Minute {
			return nil, fmt.Errorf("writer: reconnect for 2 minutes: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c.conn, nil
}

// drop closes a connection that broke.
func (c *writerConn) drop() {
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}

func (c *writerConn) close() { c.drop() }

func (w *Workload) writer(ctx context.Context, e *Env, rng *mrand.Rand) error {
	wc := &writerConn{dsn: e.DSN, opened: w.backends.opened}
	defer wc.close()
	for !w.done(ctx) {
		conn, err := wc.get(ctx)
		if err != nil || conn == nil {
			return err // nil: ctx ended
		}
		rows := 1 + rng.IntN(w.MaxTxRows)
		rollback := rng.Float64() < w.Rollback
		business := rng.Float64() < w.Business
		ids, err := w.tx(ctx, e, conn, rng, rows, rollback, business)
		switch classify(ctx, conn, err) {
		case txDone:
			if rollback {
				w.record(w.rolledBack, ids)
			} else {
				w.committed.Add(int64(rows))
			}
		case txAborted:
			w.record(w.rolledBack, ids)
		case txStopped:
			w.record(w.unknown, ids)
			return nil
		case txUnknown:
			// N.B. a COMMIT whose answer was lost may have committed: the
			// outbox table, read at the end, is the truth.
			w.record(w.unknown, ids)
			wc.drop()
			continue
		default:
			return fmt.Errorf("writer: %w", err)
		}
		if w.Pause > 0 {
			time.Sleep(w.Pause)
		}
	}
	return nil
}

func (w *Workload) record(set map[string]bool, ids []string) {
	w.mu.Lock()
	for _, id := range ids {
		set[id] = true
	}
	w.mu.Unlock()
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
