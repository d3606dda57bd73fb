package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The writers' one loop, shared by Workload and ShapeWorkload, which each
// add their own transactions: writeLog keeps what became of the rows,
// run starts the writers and waits for them and their server processes,
// writerConn reconnects a writer after a restart or a cut connection, and
// classify says what became of one attempted transaction.

// writeLog is what a workload knows of its rows: those committed, rolled
// back (whole transactions and savepoints) and of unknown outcome, and
// the server processes of its writers.
type writeLog struct {
	committed  atomic.Int64
	mu         sync.Mutex
	rolledBack map[string]bool
	unknown    map[string]bool // the connection broke: committed or not
	backends   backends
}

func (l *writeLog) init() {
	l.mu.Lock()
	if l.rolledBack == nil {
		l.rolledBack, l.unknown = map[string]bool{}, map[string]bool{}
	}
	l.mu.Unlock()
}

// Committed is the number of outbox rows whose commit succeeded (poison
// rows not counted).
func (l *writeLog) Committed() int64 { return l.committed.Load() }

// RolledBack returns the ids of rows rolled back, whole transactions and
// savepoints (phantom candidates).
func (l *writeLog) RolledBack() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool, len(l.rolledBack))
	for id := range l.rolledBack {
		out[id] = true
	}
	return out
}

// Unknown returns how many rows were in transactions whose connection broke
// before the outcome was known; the outbox tables say which committed.
func (l *writeLog) Unknown() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.unknown)
}

func (l *writeLog) record(set map[string]bool, ids []string) {
	if len(ids) == 0 {
		return
	}
	l.mu.Lock()
	for _, id := range ids {
		set[id] = true
	}
	l.mu.Unlock()
}

// run runs n writers (writer(ctx, i), i = 0..n-1), waits for them and for
// their server processes (backends.await), and returns the first error.
func (l *writeLog) run(ctx context.Context, e *Env, n int, writer func(ctx context.Context, i uint64) error) error {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i uint64) {
			defer wg.Done()
			errs <- writer(ctx, i)
		}(uint64(i))
	}
	wg.Wait()
	l.backends.await(e)
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// txAttempt is one transaction a writer attempted: the ids of its outbox
// rows and of its rows rolled back with a savepoint, how many rows count
// as committed, whether it was rolled back on purpose, and what else to
// note once it committed or once the server aborted it.
type txAttempt struct {
	ids, spIDs []string
	rows       int
	rollback   bool
	committed  func()
	aborted    func()
}

// loop is one writer: it connects (again after a restart or a cut
// connection), runs attempt until done, records what became of each
// transaction and sleeps pause between them.
func (l *writeLog) loop(ctx context.Context, e *Env, pause time.Duration, done func(context.Context) bool,
	attempt func(ctx context.Context, conn *pgx.Conn) (txAttempt, error)) error {
	wc := &writerConn{dsn: e.DSN, opened: l.backends.opened}
	defer wc.close()
	for !done(ctx) {
		conn, err := wc.get(ctx)
		if err != nil || conn == nil {
			return err // nil: ctx ended
		}
		a, err := attempt(ctx, conn)
		l.record(l.rolledBack, a.spIDs)
		switch classify(ctx, conn, err) {
		case txDone:
			if a.rollback {
				l.record(l.rolledBack, a.ids)
				break
			}
			l.committed.Add(int64(a.rows))
			if a.committed != nil {
				a.committed()
			}
		case txAborted:
			l.record(l.rolledBack, a.ids)
			if a.aborted != nil {
				a.aborted()
			}
		case txStopped:
			l.record(l.unknown, a.ids)
			return nil
		case txUnknown:
			// N.B. a COMMIT whose answer was lost may have committed: the
			// outbox tables, read at the end, are the truth.
			l.record(l.unknown, a.ids)
			wc.drop()
			continue
		default:
			return fmt.Errorf("writer: %w", err)
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	return nil
}

// start runs run in the background until it returns or Stop is called.
func (l *writeLog) start(run func(ctx context.Context) error) *Writing {
	ctx, cancel := context.WithCancel(context.Background())
	wr := &Writing{cancel: cancel, done: make(chan struct{})}
	go func() {
		wr.err = run(ctx)
		close(wr.done)
	}()
	return wr
}

// Writing is a workload running in the background.
type Writing struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
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
