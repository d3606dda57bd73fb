package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestDebeziumPublicationTakeover: walrelay streams from the publication
// and slot a Debezium connector made with publication.autocreate.mode
// all_tables (FOR ALL TABLES, publishing inserts, updates, deletes and
// truncates), started only from `walrelay import-debezium` of that
// connector's configuration. Transactions mix outbox inserts with updates
// of outbox rows and inserts, updates, deletes and a truncate of other
// tables: walrelay is not refused, relays every outbox insert exactly once
// and byte-exact, counts the outbox updates as ignored, and confirms the
// slot past the last commit.
func TestDebeziumPublicationTakeover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := pgx.Identifier{e.Pub}.Sanitize()
	e.Bed.Exec(t, e.DSN, `CREATE PUBLICATION `+pub+` FOR ALL TABLES`)
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	e.Bed.Exec(t, e.DSN, `CREATE TABLE audit (id bigserial PRIMARY KEY, note text)`)

	pc, err := pgconn.ParseConfig(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	connector := map[string]any{"name": "orders-outbox", "config": map[string]string{
		"connector.class":             "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname":           pc.Host,
		"database.port":               strconv.Itoa(int(pc.Port)),
		"database.user":               pc.User,
		"database.password":           pc.Password,
		"database.dbname":             pc.Database,
		"topic.prefix":                "shop",
		"plugin.name":                 "pgoutput",
		"slot.name":                   e.Slot,
		"publication.name":            e.Pub,
		"publication.autocreate.mode": "all_tables",
		"table.include.list":          "public.outbox",
		"key.converter":               "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":             "org.apache.kafka.connect.storage.StringConverter",
		"transforms":                  "outbox",
		"transforms.outbox.type":      "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.fields.additional.placement": "type:header:eventType",
	}}
	b, err := json.Marshal(connector)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "connector.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := e2etest.RunOnce(t, nil, "import-debezium", "--format", "flags", file)
	if code != 0 {
		t.Fatalf("walrelay import-debezium: exit %d:\n%s", code, out)
	}
	if pc.Password != "" && strings.Contains(out, pc.Password) {
		t.Fatalf("walrelay import-debezium printed the password:\n%s", out)
	}
	var args []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "--") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if len(v) >= 2 && v[0] == '\'' {
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
		}
		args = append(args, k+"="+v)
	}
	// N.B. what a connector file does not hold: the brokers, and where
	// the metrics are served.
	args = append(args, "--brokers", strings.Join(e.KafkaBrokers(), ","), "--status-interval", "1s",
		"--topic-partitions", "3", "--http-addr", "127.0.0.1:0", "--create=false")
	environ := []string{"PGPASSWORD=" + pc.Password}
	relay := &relayProc{Relay: harness.StartProcess(t, relayBin, environ, append([]string{"run"}, args...)), T: t, Env: e}
	relay.WaitStreaming()

	wit := e.Witness(t)
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(context.Background())
	ctx := context.Background()
	var xids []uint32
	const txs = 30
	for i := 0; i < txs; i++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := harness.NewUUID()
		for _, sql := range []string{
			`INSERT INTO orders (customer, total) VALUES ('c', ` + strconv.Itoa(i) + `)`,
			`INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ('` + id + `', '` + e.AggType(i) + `', 'agg-` + strconv.Itoa(i%7) + `', 'OrderCreated', jsonb_build_object('i', ` + strconv.Itoa(i) + `))`,
			`UPDATE orders SET note = 'seen' WHERE total = ` + strconv.Itoa(i),
			// N.B. an update of the outbox row that leaves it as it was:
			// Debezium's publication sends it, walrelay ignores it.
			`UPDATE outbox SET type = type WHERE id = '` + id + `'`,
			`INSERT INTO audit (note) VALUES ('x')`,
			`DELETE FROM audit`,
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		if i == txs/2 {
			if _, err := tx.Exec(ctx, `TRUNCATE audit`); err != nil {
				t.Fatal(err)
			}
		}
		var xid int64
		if err := tx.QueryRow(ctx, `SELECT txid_current() % 4294967296`).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		xids = append(xids, uint32(xid))
	}
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, xids))
	checkAllRelayed(t, e)
	if n := relay.Metric("walrelay_changes_ignored_total"); n < txs {
		t.Errorf("walrelay_changes_ignored_total %v, want at least %d (one outbox update a transaction)", n, txs)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestBytesConverterRefusesNonByteaPayload: --value-converter bytes
// (ByteArrayConverter) takes a bytea payload only; with the jsonb outbox
// walrelay run and check exit 2 at start naming the column (rather than
// dead-lettering every event).
func TestBytesConverterRefusesNonByteaPayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, cmd := range []string{"check", "run"} {
		code, out := e2etest.RunOnce(t, nil, e.Args(cmd, "--value-converter", "bytes")...)
		if code != 2 || !strings.Contains(out, "payload") || !strings.Contains(out, "bytea") {
			t.Errorf("walrelay %s --value-converter bytes on a jsonb payload: exit code %d, want 2 naming the payload column and bytea:\n%s", cmd, code, out)
		}
	}
}

// TestJSONSchemaNullabilityMismatchRefused: json-schema writes the key's and
// the payload's "optional" from --nullable-columns, Debezium from the
// catalog's NOT NULL. A payload declared NOT NULL while --nullable-columns
// names it (its default) would give other bytes than Debezium's: check
// and run exit 2 naming the fix; with --nullable-columns ” check passes.
func TestJSONSchemaNullabilityMismatchRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ALTER COLUMN payload SET NOT NULL`)
	for _, cmd := range []string{"check", "run"} {
		code, out := e2etest.RunOnce(t, nil, e.Args(cmd, "--value-converter", "json-schema")...)
		if code != 2 || !strings.Contains(out, "--nullable-columns") || !strings.Contains(out, "NOT NULL") {
			t.Errorf("walrelay %s --value-converter json-schema with a NOT NULL payload: exit code %d, want 2 naming NOT NULL and --nullable-columns:\n%s", cmd, code, out)
		}
	}
	if code, out := e2etest.RunOnce(t, nil, e.Args("check", "--value-converter", "json-schema", "--nullable-columns", "")...); code != 0 {
		t.Errorf("walrelay check with --nullable-columns '': exit code %d, want 0:\n%s", code, out)
	}
}

// TestCheckDebeziumSlot: walrelay check against the slot and publication
// Debezium's PostgreSQL connector creates (CREATE_REPLICATION_SLOT ...
// pgoutput; publication.autocreate.mode all_tables: FOR ALL TABLES,
// filtered: FOR TABLE of the include list, both with every operation
// published) says what it found — plugin, scope, operations, the slot's
// confirmed position as pg_replication_slots has it — and that walrelay
// can take it over; a slot of another plugin fails the check (exit 2).
func TestCheckDebeziumSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := pgx.Identifier{e.Pub}.Sanitize()
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	e.Bed.Exec(t, e.DSN, `INSERT INTO orders (customer, total) VALUES ('c', 1)`)
	var confirmed string
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&confirmed); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mode, ddl, scope string }{
		{"all_tables", `CREATE PUBLICATION ` + pub + ` FOR ALL TABLES`, "FOR ALL TABLES (all tables)"},
		{"filtered", `CREATE PUBLICATION ` + pub + ` FOR TABLE public.outbox, public.orders`, "filtered, tables public.orders, public.outbox"},
	} {
		e.Bed.Exec(t, e.DSN, `DROP PUBLICATION IF EXISTS `+pub)
		e.Bed.Exec(t, e.DSN, tc.ddl)
		code, out := e2etest.RunOnce(t, nil, e.Args("check", "--create=false")...)
		if code != 0 {
			t.Errorf("%s: walrelay check: exit code %d, want 0:\n%s", tc.mode, code, out)
		}
		for _, want := range []string{
			"PASS  slot takeover: found slot " + strconv.Quote(e.Slot) + " (plugin pgoutput, inactive, confirmed_flush_lsn " + confirmed + ")",
			tc.scope + "; publishes insert, update, delete, truncate",
			"walrelay can take it over: it streams from " + confirmed,
			"updates, deletes, truncates of the outbox",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: walrelay check output lacks %q:\n%s", tc.mode, want, out)
			}
		}
	}
	// Still streamed (Debezium running): a warning naming the holder.
	// N.B. a slot made after the publication: pgoutput looks the
	// publication up as of the WAL it decodes, where a publication made
	// after the slot's changes does not exist yet.
	active := e.Slot + "_active"
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, active)
	t.Cleanup(func() { e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, active) })
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, active).Scan(&confirmed); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rconn, err := pgconn.Connect(ctx, testbed.ReplicationDSN(e.DSN))
	if err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(confirmed)
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, rconn, active, lsn, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + e.Pub + "'"},
	}); err != nil {
		t.Fatal(err)
	}
	s := e.Bed.Slot(t, e.DSN, active)
	for deadline := time.Now().Add(10 * time.Second); !s.Active && time.Now().Before(deadline); s = e.Bed.Slot(t, e.DSN, active) {
		time.Sleep(50 * time.Millisecond)
	}
	if !s.Active {
		t.Fatalf("slot %s not active after START_REPLICATION: %+v", active, s)
	}
	code, out := e2etest.RunOnce(t, nil, e.Args("check", "--create=false", "--slot", active)...)
	want := "WARN  slot takeover: slot " + strconv.Quote(active) + " is streamed by pid " + strconv.Itoa(int(s.ActivePID)) + " (Debezium still running?): stop the connector first"
	if !strings.Contains(out, want) || !strings.Contains(out, "active, held by pid "+strconv.Itoa(int(s.ActivePID))) {
		t.Errorf("walrelay check on a streamed slot (exit code %d) lacks %q:\n%s", code, want, out)
	}
	rconn.Close(context.Background())
	// N.B. the walsender ends with the connection; the slot is dropped
	// only once it is released.
	for deadline := time.Now().Add(10 * time.Second); e.Bed.Slot(t, e.DSN, active).Active && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}

	other := e.Slot + "_decoding"
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, other)
	t.Cleanup(func() { e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, other) })
	if code, out := e2etest.RunOnce(t, nil, e.Args("check", "--create=false", "--slot", other)...); code != 2 || !strings.Contains(out, "test_decoding") {
		t.Errorf("walrelay check on a test_decoding slot: exit code %d, want 2 naming the plugin:\n%s", code, out)
	}
}

// TestJSONSchemaConstantDefaultRefused: Debezium writes a column's constant
// default into its json-schema schema ("default"), which walrelay does not:
// with json-schema, check and run exit 2 naming the column and the fix; a
// function's default (which Debezium does not evaluate) and the json
// converter pass.
func TestJSONSchemaConstantDefaultRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ALTER COLUMN payload SET DEFAULT '{}'::jsonb`)
	for _, cmd := range []string{"check", "run"} {
		code, out := e2etest.RunOnce(t, nil, e.Args(cmd, "--value-converter", "json-schema")...)
		if code != 2 || !strings.Contains(out, "DEFAULT '{}'::jsonb") || !strings.Contains(out, "DROP DEFAULT") {
			t.Errorf("walrelay %s --value-converter json-schema with a constant payload default: exit code %d, want 2 naming the default and DROP DEFAULT:\n%s", cmd, code, out)
		}
	}
	if code, out := e2etest.RunOnce(t, nil, e.Args("check", "--value-converter", "json")...); code != 0 {
		t.Errorf("walrelay check --value-converter json: exit code %d, want 0:\n%s", code, out)
	}
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ALTER COLUMN payload SET DEFAULT jsonb_build_object()`)
	if code, out := e2etest.RunOnce(t, nil, e.Args("check", "--value-converter", "json-schema")...); code != 0 {
		t.Errorf("walrelay check --value-converter json-schema with a function default: exit code %d, want 0:\n%s", code, out)
	}
}
