package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/outbox"
	"github.com/walrelay/walrelay/test/testbed"
)

// OutboxDDL is the outbox table of DESIGN.md, plus a business table and a
// per-aggregate sequence whose row lock orders an aggregate's events by
// commit.
const OutboxDDL = outbox.TableDDL + `
CREATE TABLE orders (id bigserial PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL, note text);
CREATE TABLE agg_seq (id text PRIMARY KEY, seq bigint NOT NULL DEFAULT 0);`

// Uniq returns 8 random hex digits.
func Uniq() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Env is one test's database, slot, publication, aggregate-type prefix and
// walrelay binary.
type Env struct {
	Bed    *testbed.Bed
	Bin    string // walrelay binary
	DSN    string
	Slot   string
	Pub    string
	Prefix string // aggregate types start with it, so topics are the test's own
	// RelayArgs are added to every StartRelay's arguments (before the
	// call's own), e.g. by ExactlyOnce.
	RelayArgs []string
}

// NewEnv creates a database for the test with OutboxDDL in it.
func NewEnv(t testing.TB, bin string) *Env {
	t.Helper()
	return NewEnvOn(t, testbed.Get(t), bin)
}

// NewEnvOn is NewEnv on the servers of b.
func NewEnvOn(t testing.TB, b *testbed.Bed, bin string) *Env {
	t.Helper()
	e := &Env{Bed: b, Bin: bin, DSN: b.NewDatabase(t), Slot: "s_" + Uniq(), Pub: "p_" + Uniq(), Prefix: "t" + Uniq()}
	b.Exec(t, e.DSN, OutboxDDL)
	return e
}

// AggType is the aggregate type of aggregate k: two types, so two topics.
func (e *Env) AggType(k int) string {
	if k%2 == 0 {
		return e.Prefix + "_order"
	}
	return e.Prefix + "_customer"
}

// Topics are the topics of AggType.
func (e *Env) Topics() []string {
	return []string{"outbox.event." + e.AggType(0), "outbox.event." + e.AggType(1)}
}

// Walsender returns the pid of the walsender streaming e's slot, 0 when no
// walrelay streams it.
//
// N.B. the backend creating the slot holds it too, until the slot reaches
// its consistent point: only a walsender means streaming.
func (e *Env) Walsender(t testing.TB) int {
	t.Helper()
	var pid int
	err := e.Bed.QueryRow(t, e.DSN, `SELECT coalesce((SELECT s.active_pid FROM pg_replication_slots s
		JOIN pg_stat_activity a ON a.pid = s.active_pid
		WHERE s.slot_name = $1 AND a.backend_type = 'walsender'), 0)`, e.Slot).Scan(&pid)
	if err != nil {
		t.Fatalf("read the walsender of slot %s: %v", e.Slot, err)
	}
	return pid
}

// OutboxRow is a committed outbox row as PostgreSQL renders it.
type OutboxRow struct {
	ID, AggType, AggID, Type string
	Payload                  *string
	Seq                      int64  // payload's seq, 0 when it has none
	Xid                      uint32 // the inserting transaction (xmin)
}

// CommittedRows reads every row of the outbox table, and of MessageLedger
// when a Workload emitted messages.
func (e *Env) CommittedRows(t testing.TB) map[string]OutboxRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// N.B. the events a Workload emitted as messages are in its ledger.
	var ledger bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, MessageLedger).Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	query := `SELECT id::text, aggregatetype, aggregateid, type, payload::text,
		coalesce((payload->>'seq')::bigint, 0), xmin::text FROM outbox`
	if ledger {
		query += ` UNION ALL SELECT id::text, aggregatetype, aggregateid, type, payload::text,
		coalesce((payload->>'seq')::bigint, 0), xmin::text FROM ` + MessageLedger
	}
	rows, err := conn.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]OutboxRow{}
	for rows.Next() {
		var r OutboxRow
		var xmin string
		if err := rows.Scan(&r.ID, &r.AggType, &r.AggID, &r.Type, &r.Payload, &r.Seq, &xmin); err != nil {
			t.Fatal(err)
		}
		x, err := strconv.ParseUint(xmin, 10, 32)
		if err != nil {
			t.Fatalf("xmin %q: %v", xmin, err)
		}
		r.Xid = uint32(x)
		out[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Header returns the value of a record's header.
func Header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// Connect opens a connection to dsn, failing the test on error.
func Connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// WaitFor polls cond every 200 ms, failing the test after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// DSNVia returns dsn (URL form) connecting to hostport instead, with params
// added (application_name, say).
func DSNVia(t testing.TB, dsn, hostport string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	if hostport != "" {
		u.Host = hostport
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// PGHostPort is the host:port of dsn (URL form).
func PGHostPort(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	return u.Host
}

// Database is the name of e's database.
func (e *Env) Database(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(e.DSN)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// SetDatabase sets a parameter for every later connection to e's database
// (ALTER DATABASE ... SET): the test's own walsenders included, no other
// test's.
func (e *Env) SetDatabase(t testing.TB, name, value string) {
	t.Helper()
	e.Bed.Exec(t, e.DSN, fmt.Sprintf("ALTER DATABASE %s SET %s = %s",
		pgx.Identifier{e.Database(t)}.Sanitize(), pgx.Identifier{name}.Sanitize(), quoteLiteral(value)))
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
