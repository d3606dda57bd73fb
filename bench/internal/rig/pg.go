package rig

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/test/outbox"
)

func pgHost(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	return cfg.Host
}

// PGPort returns the port of a DSN.
func PGPort(dsn string) int {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return 0
	}
	return int(cfg.Port)
}

// OutboxDDL is the outbox table of DESIGN.md and a payload function that
// makes one ~300-byte JSON document; "ts" is the insert time
// (clock_timestamp, microseconds since the epoch), from which the latency
// consumer measures.
const OutboxDDL = outbox.TableDDL + `
CREATE FUNCTION bench_payload(i bigint) RETURNS jsonb LANGUAGE sql VOLATILE AS $$
  SELECT jsonb_build_object(
    'ts', (extract(epoch from clock_timestamp()) * 1000000)::bigint,
    'seq', i,
    'customer', jsonb_build_object('id', 'cust-' || (i % 997), 'name', 'Customer ' || (i % 997),
                                   'email', 'customer' || (i % 997) || '@example.com'),
    'items', jsonb_build_array(
      jsonb_build_object('sku', 'SKU-' || (i % 1000), 'qty', 1 + i % 5, 'price', 19.99),
      jsonb_build_object('sku', 'SKU-' || ((i + 7) % 1000), 'qty', 2, 'price', 5.5)),
    'total', 42.48, 'currency', 'EUR', 'note', 'single-row outbox benchmark event')
$$;
-- One transaction per row: COMMIT inside a procedure ends the current one.
CREATE PROCEDURE bench_fill(p_type text, p_from bigint, p_to bigint, p_aggs int)
LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN p_from..p_to LOOP
    INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
    VALUES (gen_random_uuid(), p_type, 'agg-' || (i % p_aggs), 'OrderCreated', bench_payload(i));
    COMMIT;
  END LOOP;
END $$;`

// CreateSlot creates a publication FOR TABLE public.outbox WITH (publish =
// 'insert') and a pgoutput slot; both must exist before the rows they are to
// stream are written.
func CreateSlot(ctx context.Context, dsn, slot, pub string) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE PUBLICATION `+pgx.Identifier{pub}.Sanitize()+` FOR TABLE public.outbox WITH (publish = 'insert')`); err != nil {
		return 0, fmt.Errorf("create publication %s: %w", pub, err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, slot).Scan(&lsn); err != nil {
		return 0, fmt.Errorf("create slot %s: %w", slot, err)
	}
	return pglogrepl.ParseLSN(lsn)
}

// DropSlot drops a slot (waiting up to 30 s for its consumer to go away) and
// its publication; missing ones are not an error.
func DropSlot(ctx context.Context, dsn, slot, pub string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" && time.Now().Before(deadline) { // still active
			time.Sleep(200 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("drop slot %s: %w", slot, err)
	}
	if pub != "" {
		if _, err := conn.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{pub}.Sanitize()); err != nil {
			return fmt.Errorf("drop publication %s: %w", pub, err)
		}
	}
	return nil
}

// SlotState is a row of pg_replication_slots.
type SlotState struct {
	ConfirmedFlush pglogrepl.LSN
	ActivePID      int
}

// SlotWatcher polls pg_replication_slots over one connection.
type SlotWatcher struct {
	conn *pgx.Conn
}

// NewSlotWatcher connects.
func NewSlotWatcher(ctx context.Context, dsn string) (*SlotWatcher, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	return &SlotWatcher{conn: conn}, nil
}

// Close closes the connection.
func (w *SlotWatcher) Close() { w.conn.Close(context.Background()) }

// State reads one slot.
func (w *SlotWatcher) State(ctx context.Context, slot string) (SlotState, error) {
	var lsn *string
	var pid *int32
	err := w.conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, active_pid FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lsn, &pid)
	if err != nil {
		return SlotState{}, fmt.Errorf("read slot %s: %w", slot, err)
	}
	var st SlotState
	if lsn != nil {
		if st.ConfirmedFlush, err = pglogrepl.ParseLSN(*lsn); err != nil {
			return st, err
		}
	}
	if pid != nil {
		st.ActivePID = int(*pid)
	}
	return st, nil
}

// Marker commits the transaction that ends a backlog: two outbox rows of
// aggregate type typ. It returns the LSN between the two inserts, read
// inside the transaction: every earlier transaction ends before it, and
// whichever position a relay confirms for the marker (walrelay: the commit's
// end; Debezium: the LSN of the last event it processed, the second insert;
// pg_recvlogical --endpos: the end position itself) is at or after it.
func Marker(ctx context.Context, dsn, typ string) (pglogrepl.LSN, error) {
	return MarkerWith(ctx, dsn, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), $1, 'marker', 'Marker', bench_payload(-1))`, "insert marker", typ)
}

// MarkerWith is Marker with another statement for each of the two events
// (e.g. a logical decoding message), given typ as $1; what names it in
// errors ("insert marker").
func MarkerWith(ctx context.Context, dsn, stmt, what, typ string) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, stmt, typ); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	var s string
	if err := tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, stmt, typ); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit marker: %w", err)
	}
	return pglogrepl.ParseLSN(s)
}
