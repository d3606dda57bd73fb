package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/outbox"
)

const (
	db         = "walrelay_compat"
	partitions = 6
	// Both producers may send records up to 4 MiB (the 1 MiB payload needs
	// more than either's default of about 1 MB); the bed's broker takes 16 MiB.
	maxRecordBytes = 4 << 20
)

// deliberate are the differences DESIGN.md documents: the record timestamp
// is the transaction's commit time in walrelay and the time the connector
// processed the event in Debezium.
var deliberate = map[string]string{
	"timestamp": "walrelay stamps each record with its transaction's commit time; Debezium's router uses the time the connector processed the event (DESIGN.md, record format)",
}

// contextHeaders explains the one header difference walrelay makes on
// purpose.
const contextHeaders = "Debezium 3 puts four __debezium.context.* headers (connectorLogicalName, taskId, connectorName, runId) before the router's headers; they describe the Connect deployment, not the event, and walrelay does not emit them (README, migrating from Debezium)"

// deliberateFor says why a difference is deliberate, or "" for a bug.
func deliberateFor(field, between, kind string) string {
	if d := deliberate[field]; d != "" {
		return d
	}
	// Debezium's leading context headers, and nothing else: the headers
	// after them are compared on their own.
	if field == "headers" && (between == "debezium vs PostgreSQL" && strings.HasPrefix(kind, "context headers ") ||
		between == "walrelay vs debezium" && strings.HasPrefix(kind, "context headers: walrelay [], ")) {
		return contextHeaders
	}
	return ""
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s compat: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() { os.Exit(run()) }

func run() int {
	out := flag.String("out", "bench/results", "directory for the report")
	bin := flag.String("walrelay", "", "walrelay binary (default: build ./cmd/walrelay)")
	only := flag.String("config", "", "run only this configuration, without the takeovers (default: every configuration and the takeovers)")
	flag.Parse()
	env, err := rig.FromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "compat: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// N.B. a bound for a run that hangs, not a speed: a busy machine takes
	// several times the 4 minutes of an idle one.
	ctx, cancel := context.WithTimeout(ctx, 60*time.Minute)
	defer cancel()
	rep, err := compat(ctx, env, *bin, *only)
	if err != nil {
		logf("%v", err)
		return 1
	}
	md := rep.markdown()
	fmt.Print(md)
	host, _ := os.Hostname()
	base := filepath.Join(*out, time.Now().Format("2006-01-02")+"-"+host+"-compat")
	if err := os.MkdirAll(*out, 0o755); err == nil {
		js, _ := json.MarshalIndent(rep, "", "  ")
		_ = os.WriteFile(base+".json", append(js, '\n'), 0o644)
		_ = os.WriteFile(base+".md", []byte(md), 0o644)
		logf("report: %s.md", base)
	}
	if rep.Unexpected > 0 {
		logf("%d undocumented kind(s) of difference", rep.Unexpected)
		return 1
	}
	return 0
}

// row is one committed outbox row as PostgreSQL renders it.
type row struct {
	Label   string  `json:"label"`
	Table   string  `json:"table"`
	ID      string  `json:"id"`
	AggType string  `json:"aggregatetype"`
	AggID   string  `json:"aggregateid"`
	Type    string  `json:"type"`
	Payload *string `json:"-"`
	StampMs *int64  `json:"-"` // outbox_placed: the occurred column in ms, nil for NULL
	Trace   *string `json:"-"` // outbox_traced: the trace context column, nil for NULL
}

// Diff is one kind of difference and the rows that show it.
type Diff struct {
	Field      string   `json:"field"`
	Between    string   `json:"between"`
	Kind       string   `json:"kind"`
	Rows       []string `json:"rows"`
	Example    string   `json:"example"`
	Deliberate string   `json:"deliberate,omitempty"`
}

// Report is what compat found, one section per connector configuration.
type Report struct {
	Date            string            `json:"date"`
	Rows            int               `json:"rows"`
	Versions        string            `json:"versions"`
	Checked         []string          `json:"checked"`
	Unexpected      int               `json:"unexpected"`
	ConnectSettings map[string]string `json:"connect_worker"`
	Configs         []*ConfigReport   `json:"configurations"`
	Takeovers       []*TakeoverReport `json:"takeovers"`
}

// ConfigReport is one connector configuration: what Debezium ran, what
// walrelay was started with (import-debezium's output of the same file),
// and the differences.
type ConfigReport struct {
	Name           string            `json:"name"`
	About          string            `json:"about"`
	Rows           int               `json:"rows"`
	Walrelay       int               `json:"walrelay_records"`
	Debezium       int               `json:"debezium_records"`
	Diffs          []Diff            `json:"differences"`
	Unexpected     int               `json:"unexpected"`
	DebeziumConfig map[string]string `json:"debezium_connector"`
	Imported       []string          `json:"walrelay_imported"`
	WalrelayArgs   []string          `json:"walrelay_args"`
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var ddl = outbox.TableDDL + `
-- json keeps the text as written (whitespace, key order, duplicate keys).
` + outbox.Table("outbox_json", "json") + `
-- bytea: the bytes converters (ByteArrayConverter, JsonConverter's base64).
` + outbox.Table("outbox_bytes", "bytea") + `
-- the router's partition placement and event timestamp columns.
` + outbox.Table("outbox_placed", "jsonb", "part integer", "occurred timestamp") + `
-- table.expand.json.payload: payloads of every shape the inference takes,
-- and some it leaves as they are.
` + outbox.Table("outbox_expand", "jsonb") + `
-- the router's tracing.span.context.field (tracing.go).
` + outbox.Table(tracedTable, "jsonb", traceColumn+" text")

// ins is one insert: its payload is an SQL expression.
type ins struct {
	label, table, aggType, aggID, typ, payloadSQL string // outbox_placed: the SQL of payload, part and occurred
}

// transactions are the rows to relay, one slice per transaction.
func transactions() (committed [][]ins, rolledBack []ins, deleted ins) {
	o, j := "outbox", "outbox_json"
	committed = [][]ins{
		{{"simple", o, "Order", "order-1", "OrderCreated", `'{"orderId": 1, "total": 9.99}'`}},
		{
			{"unicode payload", o, "Order", "order-2", "OrderCreated", `'{"text": "ünïcødé ✓ 日本語 🎉 \"quoted\" back\\slash\nnewline\ttab", "escaped": "\u00e9\u2713"}'`},
			{"unicode key and type", o, "Customer", "kunde-ü-🎉 \"q\"", "KundeAngelegt✓", `'{"name": "Zoë Ångström"}'`},
			{"third aggregate type", o, "shipment-v2", "ship-1", "Shipped", `'{"carrier": "DHL"}'`},
		},
		{{"nested JSON", o, "Order", "order-3", "OrderUpdated", `jsonb_build_object('a', jsonb_build_object('b', jsonb_build_object('c', jsonb_build_array(1, 2.50, -0.0, 1e100, null, true, false, '', jsonb_build_object('d', '[]'::jsonb)))), 'empty', '{}'::jsonb, 'big', 12345678901234567890123)`}},
		{{"1 MiB payload", o, "Order", "order-4", "OrderArchived", `jsonb_build_object('kind', 'big', 'blob', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32768) i))`}},
		{{"NULL payload", o, "Order", "order-5", "OrderDeleted", `NULL`}},
		{
			{"JSON string scalar", o, "payment.v1", "pay-1", "PaymentMade", `'"just a string"'`},
			{"JSON number scalar", o, "payment.v1", "pay-1", "PaymentMade", `'42'`},
			{"empty object", o, "payment.v1", "pay-2", "PaymentMade", `'{}'`},
			{"empty array", o, "payment.v1", "pay-2", "PaymentMade", `'[]'`},
		},
		{{"json column, whitespace and key order kept", j, "Order", "order-6", "OrderCreated", `'{ "z": 1,  "a" : [1,2 ,3], "z": 2 }'`}},
		{{"json column, unicode escapes kept", j, "Customer", "cust-9", "CustomerCreated", `'{"name": "\u00e9t\u00e9 ✓"}'`}},
		{{"json column, raw newline and tab", j, "Order", "order-7", "OrderCreated", `E'{\n\t"a": "x"}'`}},
		{
			{"bytea payload", "outbox_bytes", "Blob", "blob-1", "BlobStored", `'\x00ff41e29c93'::bytea`},
			{"empty bytea payload", "outbox_bytes", "Blob", "blob-1", "BlobStored", `''::bytea`},
			{"NULL bytea payload", "outbox_bytes", "Blob", "blob-2", "BlobDeleted", `NULL`},
		},
	}
	// Many rows in one transaction over many keys: partitions and order.
	var many []ins
	for i := 0; i < 200; i++ {
		t := []string{"Order", "Customer", "shipment-v2"}[i%3]
		many = append(many, ins{fmt.Sprintf("bulk %d", i), o, t, fmt.Sprintf("agg-%d", i%37), "Bulk", fmt.Sprintf(`jsonb_build_object('i', %d)`, i)})
	}
	committed = append(committed, many)
	// Partition placement and event timestamps: each partition of the
	// six, a NULL partition (the key hash), timestamps of microsecond and
	// millisecond precision, the epoch, a truncated sub-millisecond, and a
	// NULL timestamp (the commit time / Debezium's processing time).
	p := "outbox_placed"
	committed = append(committed, []ins{
		{"partition 0, micro timestamp", p, "Order", "order-1", "OrderCreated", `'{"n": 1}', 0, '2025-06-01 15:04:05.123456'`},
		{"partition 5, milli timestamp", p, "Order", "order-1", "OrderCreated", `'{"n": 2}', 5, '2025-06-01 15:04:05.999'::timestamp(3)`},
		{"partition 3, the epoch", p, "Customer", "cust-1", "CustomerCreated", `'{"n": 3}', 3, '1970-01-01 00:00:00'`},
		{"NULL partition, sub-millisecond", p, "Customer", "cust-2", "CustomerCreated", `'{"n": 4}', NULL, '2001-02-03 04:05:06.0009'`},
		{"partition 1, NULL timestamp", p, "Order", "order-2", "OrderCreated", `'{"n": 5}', 1, NULL`},
		{"NULL partition, NULL timestamp", p, "shipment-v2", "ship-1", "Shipped", `NULL, NULL, NULL`},
	}, []ins{
		{"partition 2, leap day", p, "Order", "order-3", "OrderCreated", `'{"n": 6}', 2, '2020-02-29 23:59:59.999999'`},
		{"partition 4, same key other partition", p, "Order", "order-1", "OrderCreated", `'{"n": 7}', 4, '2025-06-01 15:04:05.000001'`},
	})
	e := "outbox_expand"
	committed = append(committed, []ins{
		{"expand: every kind", e, "Order", "order-1", "OrderCreated", `'{"b": true, "i": 7, "l": 3000000000, "d": 2.50, "s": "ü \"q\" 🎉 back\\slash", "n": null, "e": [], "o": {"p": {"q": [1, 2, null]}}, "neg": -12, "f": 1e-5, "big": 12345678.5, "one": 1.0}'`},
		{"expand: arrays of objects and strings", e, "Order", "order-2", "OrderCreated", `'{"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}], "tags": ["x", "y"]}'`},
		{"expand: empty object", e, "Order", "order-3", "OrderCreated", `'{}'`},
		{"expand: empty array", e, "Order", "order-3", "OrderCreated", `'[]'`},
		{"expand: string scalar", e, "Order", "order-4", "OrderCreated", `'"just a string"'`},
		{"expand: number scalar", e, "Order", "order-4", "OrderCreated", `'42'`},
		{"expand: NULL payload", e, "Order", "order-5", "OrderDeleted", `NULL`},
	}, []ins{
		{"expand: mixed array left as it is", e, "Order", "order-6", "OrderCreated", `'{"m": [1, "a"]}'`},
		{"expand: arrays of arrays", e, "Order", "order-6", "OrderCreated", `'{"nested": [[1, 2], [3]]}'`},
		{"expand: only nulls left as it is", e, "Order", "order-7", "OrderCreated", `'{"only_nulls": [null]}'`},
		{"expand: doubles and longs", e, "Order", "order-7", "OrderCreated", `'{"zero": 0.0, "tiny": 0.001, "e7": 10000000.0, "lng": -3000000000, "third": 0.3333333333333333}'`},
	})
	committed = append(committed, traceRows())
	rolledBack = []ins{{"rolled back", o, "Order", "order-rb", "OrderCreated", `'{"never": true}'`}}
	deleted = ins{"deleted in its own transaction", o, "Order", "order-del", "OrderCreated", `'{"deleted": true}'`}
	return committed, rolledBack, deleted
}

// write commits the rows of transactions and reads them back. last is a
// WAL position inside the last transaction, before its commit: a slot
// confirmed at or past it has passed every row.
func write(ctx context.Context, dsn string) (rows map[string]row, labels map[string]string, last pglogrepl.LSN, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	labels = map[string]string{} // id -> label, committed or not
	insert := func(tx pgx.Tx, in ins) (string, error) {
		id := newUUID()
		labels[id] = in.label
		q := `INSERT INTO ` + in.table + ` (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4, ` + in.payloadSQL + `)`
		if in.table == "outbox_placed" {
			q = `INSERT INTO ` + in.table + ` (id, aggregatetype, aggregateid, type, payload, part, occurred) VALUES ($1, $2, $3, $4, ` + in.payloadSQL + `)`
		}
		if in.table == tracedTable {
			q = `INSERT INTO ` + in.table + ` (id, aggregatetype, aggregateid, type, payload, ` + traceColumn + `) VALUES ($1, $2, $3, $4, ` + in.payloadSQL + `)`
		}
		_, err := tx.Exec(ctx, q, id, in.aggType, in.aggID, in.typ)
		if err != nil {
			return "", fmt.Errorf("insert %q: %w", in.label, err)
		}
		return id, nil
	}
	committed, rolledBack, deleted := transactions()
	for _, txRows := range committed {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, in := range txRows {
				if _, err := insert(tx, in); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, 0, err
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	for _, in := range rolledBack {
		if _, err := insert(tx, in); err != nil {
			return nil, nil, 0, err
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		return nil, nil, 0, err
	}
	// Inserted and deleted in one transaction: the insert is in the WAL, so
	// both relays publish it (DESIGN.md: outbox rows may be deleted at once).
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		id, err := insert(tx, deleted)
		if err != nil {
			return err
		}
		labels["deleted:"+id] = id
		if _, err = tx.Exec(ctx, `DELETE FROM outbox WHERE id = $1`, id); err != nil {
			return err
		}
		var s string
		if err := tx.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
			return err
		}
		last, err = pglogrepl.ParseLSN(s)
		return err
	})
	if err != nil {
		return nil, nil, 0, err
	}
	rows = map[string]row{}
	for _, t := range []string{"outbox", "outbox_json", "outbox_bytes", "outbox_placed", "outbox_expand", tracedTable} {
		stamp, trace := "NULL::bigint", "NULL::text"
		if t == tracedTable {
			trace = traceColumn
		}
		if t == "outbox_placed" {
			// N.B. the expected record timestamp, from PostgreSQL: the
			// microseconds since the epoch as UTC, truncated to ms.
			stamp = "trunc(extract(epoch FROM occurred AT TIME ZONE 'UTC') * 1000)::bigint"
		}
		rs, err := conn.Query(ctx, `SELECT id::text, aggregatetype, aggregateid, type, payload::text, `+stamp+`, `+trace+` FROM `+t)
		if err != nil {
			return nil, nil, 0, err
		}
		for rs.Next() {
			r := row{Table: t}
			if err := rs.Scan(&r.ID, &r.AggType, &r.AggID, &r.Type, &r.Payload, &r.StampMs, &r.Trace); err != nil {
				return nil, nil, 0, err
			}
			r.Label = labels[r.ID]
			rows[r.ID] = r
		}
		if err := rs.Err(); err != nil {
			return nil, nil, 0, err
		}
	}
	for k, id := range labels {
		if strings.HasPrefix(k, "deleted:") {
			rows[id] = row{Label: deleted.label, Table: "outbox", ID: id, AggType: deleted.aggType, AggID: deleted.aggID, Type: deleted.typ, Payload: ptr(`{"deleted": true}`)}
			delete(labels, k)
		}
	}
	return rows, labels, last, nil
}

func ptr(s string) *string { return &s }

func prefixed(p string, types []string) []string {
	var out []string
	for _, t := range types {
		out = append(out, p+t)
	}
	return out
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func headersString(hs []kgo.RecordHeader) string {
	var parts []string
	for _, h := range hs {
		v := "null"
		if h.Value != nil {
			v = fmt.Sprintf("%q", h.Value)
		}
		parts = append(parts, fmt.Sprintf("%s=%s", h.Key, v))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// contextPrefix starts the headers Debezium 3 adds to every record
// (extended.headers.enabled, on by default): connector name, logical name,
// task id and run id.
const contextPrefix = "__debezium.context."

// splitContext returns the headers without Debezium's leading context
// headers, and the names of those.
func splitContext(hs []kgo.RecordHeader) ([]kgo.RecordHeader, []string) {
	i := 0
	var names []string
	for i < len(hs) && strings.HasPrefix(hs[i].Key, contextPrefix) {
		names = append(names, hs[i].Key)
		i++
	}
	for _, h := range hs[i:] {
		if strings.HasPrefix(h.Key, contextPrefix) {
			return hs, nil // not leading: compare them as they are
		}
	}
	return hs[i:], names
}

func short(b []byte) string {
	if b == nil {
		return "null"
	}
	if len(b) > 80 {
		return fmt.Sprintf("%q… (%d bytes)", b[:80], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func byID(recs []*kgo.Record) (map[string][]*kgo.Record, []*kgo.Record) {
	m := map[string][]*kgo.Record{}
	var noID []*kgo.Record
	for _, r := range recs {
		id, ok := header(r, "id")
		if !ok {
			noID = append(noID, r)
			continue
		}
		m[id] = append(m[id], r)
	}
	return m, noID
}

// compare finds the differences of one configuration. The records of each
// side are checked against the committed rows (each exactly once, nothing
// rolled back); with checkRows also topic, key, value and headers against
// the row as PostgreSQL renders it (the StringConverter configuration);
// and walrelay's against Debezium's: topic modulo the prefixes, partition,
// key, value, headers, order per topic-partition.
func compare(rep *ConfigReport, rows map[string]row, labels map[string]string, wrRecs, dbzRecs []*kgo.Record, wrPrefix, dbzPrefix string, checkRows, eventStamp bool) {
	// Differences are grouped by field, sides and kind (the detail without
	// row-specific values); each group is one line of the report.
	groups := map[string]*Diff{}
	addKind := func(field, rowLabel, between, kind, detail string) {
		k := field + "\x00" + between + "\x00" + kind
		d := groups[k]
		if d == nil {
			example := detail
			if rowLabel != "" {
				example = rowLabel + ": " + detail
			}
			d = &Diff{Field: field, Between: between, Kind: kind, Example: example, Deliberate: deliberateFor(field, between, kind)}
			groups[k] = d
			rep.Diffs = append(rep.Diffs, Diff{}) // placeholder, filled below
		}
		d.Rows = append(d.Rows, rowLabel)
	}
	add := func(field, rowLabel, between, detail string) { addKind(field, rowLabel, between, "", detail) }
	defer func() {
		rep.Diffs = rep.Diffs[:0]
		for _, d := range groups {
			sort.Strings(d.Rows)
			if d.Deliberate == "" {
				rep.Unexpected++
			}
			rep.Diffs = append(rep.Diffs, *d)
		}
		sort.Slice(rep.Diffs, func(i, j int) bool {
			a, b := rep.Diffs[i], rep.Diffs[j]
			return a.Field+a.Between+a.Kind < b.Field+b.Between+b.Kind
		})
	}()
	wr, wrNoID := byID(wrRecs)
	dbz, dbzNoID := byID(dbzRecs)
	for _, r := range wrNoID {
		add("id header", "?", "walrelay", fmt.Sprintf("record at %s[%d]@%d has no id header: %s", r.Topic, r.Partition, r.Offset, headersString(r.Headers)))
	}
	for _, r := range dbzNoID {
		add("id header", "?", "debezium", fmt.Sprintf("record at %s[%d]@%d has no id header: %s", r.Topic, r.Partition, r.Offset, headersString(r.Headers)))
	}
	check := func(side string, recs map[string][]*kgo.Record, prefix string) {
		for id, rs := range recs {
			row, ok := rows[id]
			if !ok {
				add("phantom", labels[id], side, fmt.Sprintf("id %s was never committed (label %q)", id, labels[id]))
				continue
			}
			if len(rs) > 1 {
				add("duplicate", row.Label, side, fmt.Sprintf("%d records", len(rs)))
			}
			if !checkRows {
				continue
			}
			r := rs[0]
			if want := prefix + row.AggType; r.Topic != want {
				add("topic", row.Label, side+" vs PostgreSQL", fmt.Sprintf("%q, want %q", r.Topic, want))
			}
			if string(r.Key) != row.AggID {
				add("key", row.Label, side+" vs PostgreSQL", fmt.Sprintf("%s, want %q", short(r.Key), row.AggID))
			}
			switch {
			case row.Payload == nil && r.Value != nil:
				add("value", row.Label, side+" vs PostgreSQL", fmt.Sprintf("%s for a NULL payload, want a null value", short(r.Value)))
			case row.Payload != nil && !bytes.Equal(r.Value, []byte(*row.Payload)):
				add("value", row.Label, side+" vs PostgreSQL", fmt.Sprintf("%s, want %s", short(r.Value), short([]byte(*row.Payload))))
			}
			want := []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "eventType", Value: []byte(row.Type)}}
			hs, ctxKeys := splitContext(r.Headers)
			if len(ctxKeys) > 0 {
				addKind("headers", row.Label, side+" vs PostgreSQL", "context headers "+strings.Join(ctxKeys, ", "),
					fmt.Sprintf("adds %s", headersString(r.Headers[:len(r.Headers)-len(hs)])))
			}
			if headersString(hs) != headersString(want) {
				add("headers", row.Label, side+" vs PostgreSQL", fmt.Sprintf("%s, want %s", headersString(r.Headers), headersString(want)))
			}
		}
		for id, row := range rows {
			if _, ok := recs[id]; !ok {
				add("missing", row.Label, side, "committed row has no record")
			}
		}
	}
	check("walrelay", wr, wrPrefix)
	check("debezium", dbz, dbzPrefix)

	ids := make([]string, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return rows[ids[i]].Label < rows[ids[j]].Label })
	var tsDiffs []time.Duration
	for _, id := range ids {
		a, b := wr[id], dbz[id]
		if len(a) == 0 || len(b) == 0 {
			continue
		}
		x, y := a[0], b[0]
		label := rows[id].Label
		if strings.TrimPrefix(x.Topic, wrPrefix) != strings.TrimPrefix(y.Topic, dbzPrefix) {
			add("topic", label, "walrelay vs debezium", fmt.Sprintf("%q vs %q", x.Topic, y.Topic))
		}
		if x.Partition != y.Partition {
			add("partition", label, "walrelay vs debezium", fmt.Sprintf("%d vs %d (key %q)", x.Partition, y.Partition, x.Key))
		}
		if !bytes.Equal(x.Key, y.Key) || (x.Key == nil) != (y.Key == nil) {
			add("key", label, "walrelay vs debezium", fmt.Sprintf("%s vs %s", short(x.Key), short(y.Key)))
		}
		if !bytes.Equal(x.Value, y.Value) || (x.Value == nil) != (y.Value == nil) {
			add("value", label, "walrelay vs debezium", fmt.Sprintf("%s vs %s", short(x.Value), short(y.Value)))
		}
		xh, xc := splitContext(x.Headers)
		yh, yc := splitContext(y.Headers)
		if strings.Join(xc, ",") != strings.Join(yc, ",") {
			addKind("headers", label, "walrelay vs debezium", "context headers: walrelay ["+strings.Join(xc, ", ")+"], debezium ["+strings.Join(yc, ", ")+"]",
				fmt.Sprintf("%s vs %s", headersString(x.Headers), headersString(y.Headers)))
		}
		if headersString(xh) != headersString(yh) {
			add("headers", label, "walrelay vs debezium", fmt.Sprintf("%s vs %s", headersString(x.Headers), headersString(y.Headers)))
		}
		switch st := rows[id].StampMs; {
		case eventStamp && st != nil:
			// N.B. the router's table.field.event.timestamp: both sides
			// take it from the row, and PostgreSQL says what it is.
			if x.Timestamp.UnixMilli() != *st || y.Timestamp.UnixMilli() != *st {
				add("event timestamp", label, "walrelay vs debezium vs PostgreSQL", fmt.Sprintf("%d vs %d ms, the row's %d", x.Timestamp.UnixMilli(), y.Timestamp.UnixMilli(), *st))
			}
		case !x.Timestamp.Equal(y.Timestamp):
			tsDiffs = append(tsDiffs, y.Timestamp.Sub(x.Timestamp))
		}
	}
	if len(tsDiffs) > 0 {
		sort.Slice(tsDiffs, func(i, j int) bool { return tsDiffs[i] < tsDiffs[j] })
		detail := fmt.Sprintf("Debezium's timestamp minus walrelay's: %s to %s (median %s)", tsDiffs[0], tsDiffs[len(tsDiffs)-1], tsDiffs[len(tsDiffs)/2])
		for range tsDiffs {
			add("timestamp", "", "walrelay vs debezium", detail)
		}
	}
	// Order within each topic-partition.
	order := func(recs []*kgo.Record, prefix string) map[string][]string {
		m := map[string][]string{}
		sorted := append([]*kgo.Record(nil), recs...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Offset < sorted[j].Offset })
		for _, r := range sorted {
			id, _ := header(r, "id")
			k := fmt.Sprintf("%s[%d]", strings.TrimPrefix(r.Topic, prefix), r.Partition)
			m[k] = append(m[k], id)
		}
		return m
	}
	wo, do := order(wrRecs, wrPrefix), order(dbzRecs, dbzPrefix)
	for k, a := range wo {
		if strings.Join(a, ",") != strings.Join(do[k], ",") {
			add("order", k, "walrelay vs debezium", fmt.Sprintf("%d vs %d records, sequences differ", len(a), len(do[k])))
		}
	}
	for k, b := range do {
		if _, ok := wo[k]; !ok {
			add("order", k, "walrelay vs debezium", fmt.Sprintf("only debezium wrote %d records here", len(b)))
		}
	}
}

func (rep *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## walrelay vs Debezium record compatibility, %s\n\n", rep.Date)
	fmt.Fprintf(&b, "%d committed outbox rows relayed by Debezium (%s) and by walrelay in %d connector configurations; walrelay's settings are `walrelay import-debezium`'s output for the same connector file (its slot, publication and topic prefix renamed).\n\n", rep.Rows, rep.Versions, len(rep.Configs))
	b.WriteString("Checked: " + strings.Join(rep.Checked, "; ") + ".\n")
	esc := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	for _, c := range rep.Configs {
		fmt.Fprintf(&b, "\n### %s: %s\n\n%d committed rows; walrelay wrote %d records, Debezium %d. walrelay's imported settings:\n\n```\n%s\n```\n\n", c.Name, c.About, c.Rows, c.Walrelay, c.Debezium, strings.Join(c.Imported, "\n"))
		if len(c.Diffs) == 0 {
			b.WriteString("No differences.\n")
			continue
		}
		b.WriteString("| field | between | rows | example | documented? |\n|---|---|---|---|---|\n")
		for _, d := range c.Diffs {
			del := "**no: a bug, or a choice to document in DESIGN.md**"
			if d.Deliberate != "" {
				del = "yes: " + d.Deliberate
			}
			rows := fmt.Sprintf("%d", len(d.Rows))
			if len(d.Rows) <= 3 {
				rows = strings.Join(d.Rows, "; ")
			} else if len(d.Rows) < c.Rows {
				rows = fmt.Sprintf("%d, e.g. %s", len(d.Rows), strings.Join(d.Rows[:3], "; "))
			} else {
				rows = fmt.Sprintf("all %d", len(d.Rows))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", d.Field, d.Between, esc(rows), esc(d.Example), esc(del))
		}
		fmt.Fprintf(&b, "\n%d undocumented kind(s) of difference.\n", c.Unexpected)
	}
	if len(rep.Takeovers) > 0 {
		b.WriteString("\n### Switching from a running Debezium to walrelay on Debezium's slot\n\n" +
			"A writer commits one outbox row a transaction; Debezium (publication.autocreate.mode=all_tables) streams, is stopped mid-stream, and walrelay starts from import-debezium of the same connector file while the writer goes on. Checked over both relays' records: no committed row lost, none invented, duplicates only of rows committed after the position Debezium's slot was confirmed to.\n\n" +
			"| stop | rows | records | duplicates | Debezium's slot confirmed to | problems |\n|---|---|---|---|---|---|\n")
		for _, t := range rep.Takeovers {
			probs := "none"
			if len(t.Problems) > 0 {
				probs = fmt.Sprintf("**%d**: %s", len(t.Problems), esc(strings.Join(t.Problems[:min(3, len(t.Problems))], "; ")))
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s |\n", t.Mode, t.Rows, t.Records, t.Duplicates, t.Flushed, probs)
		}
	}
	fmt.Fprintf(&b, "\nIn all: %d undocumented kind(s) of difference or takeover problem(s).\n", rep.Unexpected)
	return b.String()
}
