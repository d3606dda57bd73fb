package harness

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ShapeWorkload is Workload for a Shape: writers commit transactions of
// outbox rows into the shape's tables, with business rows, rollbacks,
// rolled-back savepoints, rows deleted in their own transaction, one huge
// transaction and poison rows (NULL key) as configured. Like Workload's
// writers they survive server restarts and cut connections.
type ShapeWorkload struct {
	Shape      Shape
	Writers    int // concurrent writers
	Events     int // stop once this many (non-poison) outbox rows are committed; 0: until the context ends
	Aggregates int // distinct keys
	MinTxRows  int // each transaction has MinTxRows..MaxTxRows outbox rows (default 1)
	MaxTxRows  int
	// Huge is the row count of one transaction written once, when a third
	// of Events are committed (0: none); past bulkRows it is one INSERT ...
	// SELECT of rows with a single key.
	Huge      int
	Rollback  float64 // share of transactions rolled back
	Business  float64 // share of transactions that also write the orders table
	Savepoint float64 // share of transactions with rows in a savepoint rolled back before the commit
	Delete    float64 // share of committed rows deleted again in their own transaction
	// Poison is how many rows with a NULL key (poison events) to commit,
	// one per transaction, from half of Events on.
	Poison int
	Pad    int // payload padding, hex digits
	Pause  time.Duration
	// Seed makes the writers' choices reproducible (not their timing).
	Seed uint64

	idSeq      atomic.Int64
	poisonLeft atomic.Int64
	hugeDone   atomic.Bool
	parts      atomic.Int32 // part values in use: 4, or 6 once attached
	once       sync.Once

	writeLog
}

func (w *ShapeWorkload) setup() {
	w.once.Do(func() {
		w.Shape = w.Shape.withDefaults()
		w.init()
		w.poisonLeft.Store(int64(w.Poison))
		if w.Shape.AttachLater {
			w.parts.Store(4)
		} else {
			w.parts.Store(6)
		}
		if w.MinTxRows < 1 {
			w.MinTxRows = 1
		}
		w.MaxTxRows = max(w.MaxTxRows, w.MinTxRows)
	})
}

// Prepare creates the shape's tables and the per-aggregate sequence rows
// in e's database.
func (w *ShapeWorkload) Prepare(t testing.TB, e *Env) {
	t.Helper()
	w.setup()
	e.Bed.Exec(t, e.DSN, w.Shape.DDL())
	keys := make([]string, w.Aggregates)
	for k := range keys {
		keys[k] = KeyOf(w.Shape.KeyType, k)
	}
	e.Bed.Exec(t, e.DSN, `INSERT INTO agg_seq (id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, keys)
}

// Attach adds the partition for the part values the writers have not used
// yet, and lets them use it.
func (w *ShapeWorkload) Attach(t testing.TB, e *Env) {
	t.Helper()
	w.setup()
	e.Bed.Exec(t, e.DSN, w.Shape.attachDDL())
	w.parts.Store(6)
}

// PoisonCommitted is how many poison rows were committed (or may have been).
func (w *ShapeWorkload) PoisonCommitted() int { return w.Poison - int(w.poisonLeft.Load()) }

// HugeDone reports whether the huge transaction committed.
func (w *ShapeWorkload) HugeDone() bool { return w.hugeDone.Load() }

// Start runs the workload in the background.
func (w *ShapeWorkload) Start(e *Env) *Writing {
	return w.start(func(ctx context.Context) error { return w.Run(ctx, e) })
}

// Run writes until Events rows are committed or ctx ends.
func (w *ShapeWorkload) Run(ctx context.Context, e *Env) error {
	w.setup()
	return w.run(ctx, e, w.Writers, func(ctx context.Context, i uint64) error {
		return w.writer(ctx, e, i, mrand.New(mrand.NewPCG(w.Seed, i)))
	})
}

func (w *ShapeWorkload) done(ctx context.Context) bool {
	// N.B. the poison rows and the huge transaction are written before the
	// writers stop, even when the huge one alone passes Events.
	return ctx.Err() != nil || (w.Events > 0 && w.committed.Load() >= int64(w.Events) &&
		w.poisonLeft.Load() <= 0 && (w.Huge == 0 || w.hugeDone.Load()))
}

// shapeTx is one transaction's plan.
type shapeTx struct {
	rows      int
	rollback  bool
	business  bool
	savepoint int // rows in the savepoint rolled back
	poison    bool
	huge      bool
}

func (w *ShapeWorkload) plan(rng *mrand.Rand, writer uint64) shapeTx {
	p := shapeTx{rows: w.MinTxRows + rng.IntN(w.MaxTxRows-w.MinTxRows+1)}
	if writer == 0 && w.Huge > 0 && !w.hugeDone.Load() && w.committed.Load() >= int64(w.Events/3) {
		p.rows, p.huge = w.Huge, true
	}
	p.business = rng.Float64() < w.Business
	if rng.Float64() < w.Savepoint {
		p.savepoint = 1 + rng.IntN(5)
	}
	if w.committed.Load() >= int64(w.Events/2) && w.poisonLeft.Add(-1) >= 0 {
		// N.B. a poison transaction is never rolled back on purpose: the
		// relay must meet it.
		p.poison = true
		return p
	}
	p.rollback = !p.huge && rng.Float64() < w.Rollback
	return p
}

func (w *ShapeWorkload) writer(ctx context.Context, e *Env, i uint64, rng *mrand.Rand) error {
	return w.loop(ctx, e, w.Pause, w.done, func(ctx context.Context, conn *pgx.Conn) (txAttempt, error) {
		p := w.plan(rng, i)
		ids, spIDs, err := w.tx(ctx, e, conn, rng, p)
		a := txAttempt{ids: ids, spIDs: spIDs, rows: p.rows, rollback: p.rollback}
		if p.huge {
			a.committed = func() { w.hugeDone.Store(true) }
		}
		if p.poison {
			// N.B. only a poison row the server aborted is written again;
			// one that may have committed (the connection broke) is not.
			a.aborted = func() { w.poisonLeft.Add(1) }
		}
		return a, err
	})
}

func (w *ShapeWorkload) newID() string {
	n := w.idSeq.Add(1)
	switch w.Shape.IDType {
	case "uuid":
		return NewUUID()
	case "bigint":
		return strconv.FormatInt(n, 10)
	}
	return "ev-" + strconv.FormatInt(n, 10)
}

// payloadSQL is the payload expression over seq (an SQL expression), $3
// (the key as text) and $5 (padding).
func (w *ShapeWorkload) payloadSQL(seq string) string {
	note := quoteLiteral(w.Shape.withDefaults().Note)
	text := "'seq=' || " + seq + " || ' agg=' || $3::text || ' ' || " + note + " || ' ' || $5::text"
	switch w.Shape.PayloadType {
	case "json":
		return "json_build_object('seq', " + seq + ", 'agg', $3::text, 'note', " + note + ", 'list', json_build_array(1, 2.5, null, true), 'pad', $5::text)"
	case "text":
		return text
	case "bytea":
		// N.B. bytes no text encoding allows: a record value is raw bytes.
		return "'\\x00ff80'::bytea || convert_to(" + text + ", 'UTF8')"
	case "null":
		return "NULL::jsonb"
	}
	return "jsonb_build_object('seq', " + seq + ", 'agg', $3::text, 'note', " + note + ", 'nested', jsonb_build_object('list', jsonb_build_array(1, 2.5, null, true)), 'pad', $5::text)"
}

// extraSQL is the unmapped column's expression over $6 (hex digits / 32).
func (w *ShapeWorkload) extraSQL() string {
	hex := "(SELECT string_agg(md5(random()::text || g::text), '') FROM generate_series(1, $6::int) g)"
	switch w.Shape.ExtraType {
	case "jsonb":
		return "jsonb_build_object('blob', " + hex + ")"
	case "bytea":
		return "decode(" + hex + ", 'hex')"
	}
	return hex
}

func (w *ShapeWorkload) insertSQL(table string, poison bool) string {
	s := w.Shape
	cols, extra := w.columns()
	id := "$1::text::" + s.IDType
	// N.B. x names every parameter once, so each has a type even when the
	// shape's expressions leave it out.
	params := "(SELECT $3::text AS k, $5::text AS p, $6::int AS n) x"
	if poison {
		// N.B. no sequence row is locked: a NULL key has no order.
		return fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s, $2, NULL, 'OrderCreated', %s, 0, $4%s FROM %s`,
			table, cols, id, w.payloadSQL("0"), extra, params)
	}
	// N.B. the row lock on agg_seq orders a key's rows by commit; a
	// rollback gives its numbers back.
	return fmt.Sprintf(`WITH s AS (UPDATE agg_seq SET seq = seq + 1 WHERE id = $3::text RETURNING seq)
		INSERT INTO %s (%s) SELECT %s, $2, $3::text::%s, 'OrderCreated', %s, s.seq, $4%s FROM s, %s`,
		table, cols, id, s.KeyType, w.payloadSQL("s.seq"), extra, params)
}

// columns are the columns an insert names and, when the shape has an
// extra column, the expression of its value after a comma.
func (w *ShapeWorkload) columns() (cols, extra string) {
	cols = "id, aggregatetype, aggregateid, type, payload, seq, part"
	if w.Shape.ExtraType != "" {
		cols += ", extra"
		extra = ", " + w.extraSQL()
	}
	return cols, extra
}

// bulkRows is the size from which the huge transaction is one statement.
const bulkRows = 5000

// bulkSQL inserts $1 rows of key $3 in one statement, their seq numbers
// taken in one step of the key's sequence row.
func (w *ShapeWorkload) bulkSQL() string {
	s := w.Shape
	cols, extra := w.columns()
	id := map[string]string{"uuid": "gen_random_uuid()", "bigint": "txid_current() * 1000000 + g", "text": "'bulk-' || txid_current() || '-' || g"}[s.IDType]
	seq := "(s.seq - $1::int + g)"
	return fmt.Sprintf(`WITH s AS (UPDATE agg_seq SET seq = seq + $1::int WHERE id = $3::text RETURNING seq)
		INSERT INTO %s (%s) SELECT %s, $2, $3::text::%s, 'OrderCreated', %s, %s, $4%s
		FROM s, generate_series(1, $1::int) g, (SELECT $5::text AS p, $6::int AS n) x ORDER BY g`,
		s.Tables[0], cols, id, s.KeyType, w.payloadSQL(seq), seq, extra)
}

// tx runs one planned transaction; it returns the ids of its outbox rows
// and of its rows rolled back with a savepoint.
func (w *ShapeWorkload) tx(ctx context.Context, e *Env, conn *pgx.Conn, rng *mrand.Rand, p shapeTx) (ids, spIDs []string, err error) {
	s := w.Shape
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(context.Background())
	if p.huge && w.Huge > bulkRows {
		if _, err := tx.Exec(ctx, w.bulkSQL(), w.Huge, e.AggType(0), KeyOf(s.KeyType, 0), 0, pad(w.Pad), s.ExtraBytes/32); err != nil {
			return nil, nil, err
		}
		return nil, nil, tx.Commit(ctx)
	}
	b := &pgx.Batch{}
	if p.business {
		b.Queue(`INSERT INTO orders (customer, total, note) VALUES ($1, $2, 'business row')`, fmt.Sprint("c", rng.IntN(1000)), rng.IntN(10000))
	}
	extraN := s.ExtraBytes / 32
	insert := func(poison bool) string {
		id := w.newID()
		k := rng.IntN(w.Aggregates)
		table := s.Tables[rng.IntN(len(s.Tables))]
		part := rng.IntN(int(w.parts.Load()))
		b.Queue(w.insertSQL(table, poison), id, e.AggType(k), KeyOf(s.KeyType, k), part, pad(w.Pad), extraN)
		return id
	}
	// Keys in ascending order in each stretch of locks (the savepoint's,
	// released by its rollback, then the transaction's): no deadlock.
	sorted := func(n int) []int {
		ks := make([]int, n)
		for i := range ks {
			ks[i] = rng.IntN(w.Aggregates)
		}
		slices.Sort(ks)
		return ks
	}
	queueRows := func(n int) []string {
		out := make([]string, n)
		for i, k := range sorted(n) {
			out[i] = w.newID()
			table := s.Tables[rng.IntN(len(s.Tables))]
			part := rng.IntN(int(w.parts.Load()))
			b.Queue(w.insertSQL(table, false), out[i], e.AggType(k), KeyOf(s.KeyType, k), part, pad(w.Pad), extraN)
			if !p.rollback && rng.Float64() < w.Delete {
				// N.B. the WAL keeps the insert: deleting the row at once is
				// allowed, and deleted_log keeps what it was.
				b.Queue(fmt.Sprintf(`INSERT INTO deleted_log SELECT id::text, aggregateid::text, seq, %s FROM %s WHERE id = $1::text::%s`,
					s.render("payload"), table, s.IDType), out[i])
				b.Queue(fmt.Sprintf(`DELETE FROM %s WHERE id = $1::text::%s`, table, s.IDType), out[i])
			}
		}
		return out
	}
	if p.savepoint > 0 {
		b.Queue(`SAVEPOINT sp`)
		spIDs = queueRows(p.savepoint)
		// N.B. RELEASE after ROLLBACK TO: later rows belong to the top
		// transaction (xmin = its xid, the one the witness reports).
		b.Queue(`ROLLBACK TO SAVEPOINT sp`)
		b.Queue(`RELEASE SAVEPOINT sp`)
	}
	ids = queueRows(p.rows)
	if p.poison {
		ids = append(ids, insert(true))
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return ids, spIDs, err
	}
	if p.rollback {
		return ids, spIDs, tx.Rollback(ctx)
	}
	return ids, spIDs, tx.Commit(ctx)
}
