package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// Database encodings (issue 29, items 1 and 2). PostgreSQL sends a row's
// text in the replication session's client_encoding, which is the
// database's encoding unless the session, the role or the database sets
// another; walrelay relays UTF-8 whatever the database's encoding and
// whatever a role or database sets. A message's content is sent as stored,
// in the database's encoding, so the message source needs a UTF8 database;
// a SQL_ASCII database converts nothing, so walrelay refuses it.

// encodedEnv is a test environment whose database has encoding enc (C
// locale, from template0), with the outbox table in it.
func encodedEnv(t *testing.T, enc string) *env {
	t.Helper()
	b := testbed.Get(t)
	name := "t_enc_" + strings.ToLower(enc) + "_" + harness.Uniq()
	b.Exec(t, b.PGURL(), fmt.Sprintf(`CREATE DATABASE %s ENCODING '%s' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`, name, enc))
	t.Cleanup(func() {
		if err := testbed.DropDatabase(context.Background(), b.PGURL(), name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	dsn, err := testbed.WithDatabase(b.PGURL(), name)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{Env: &harness.Env{Bed: b, Bin: relayBin, DSN: dsn, Slot: "s_" + harness.Uniq(), Pub: "p_" + harness.Uniq(), Prefix: "t" + harness.Uniq()}}
	b.Exec(t, dsn, harness.OutboxDDL)
	return e
}

// utf8DSN is dsn asking for client_encoding UTF8: the test's own
// connections write and read the characters as Go holds them, whatever the
// database's, role's or database-level setting.
func utf8DSN(t *testing.T, dsn string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return harness.DSNVia(t, dsn, "", map[string]string{"client_encoding": "UTF8"})
	}
	return dsn + " client_encoding=UTF8"
}

// encEvent is one outbox row with non-ASCII text in its key, its type (the
// eventType header) and its payload.
type encEvent struct {
	key, typ, note string
}

// encEvents are the rows every encoding test writes; withEuro adds one
// with €, which LATIN1 cannot hold.
func encEvents(withEuro bool) []encEvent {
	evs := []encEvent{
		{"schlüssel", "Bestätigt", "café ü ß"},
		{"clé-Ærø", "Geändert", "naïve façade «quoted» ½ °C"},
	}
	if withEuro {
		evs = append(evs, encEvent{"prix-€", "Preis€", "12 € net — „ok“"})
	}
	return evs
}

// writeEncEvents inserts evs, one transaction each, through a UTF-8
// connection, and returns their ids in order and the xid of the last.
func writeEncEvents(t *testing.T, e *env, evs []encEvent) (ids []string, lastXid uint32) {
	t.Helper()
	ctx := context.Background()
	conn := harness.Connect(t, utf8DSN(t, e.DSN))
	defer conn.Close(ctx)
	for _, ev := range evs {
		id := harness.NewUUID()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox VALUES ($1, $2, $3, $4, jsonb_build_object('note', $5::text))`,
			id, e.AggType(0), ev.key, ev.typ, ev.note); err != nil {
			t.Fatalf("insert %+v: %v", ev, err)
		}
		lastXid = e2etest.CurrentXid(t, tx)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids, lastXid
}

// checkEncRecords checks that each record of recs is the event of ids it
// names, with key, header and payload the very characters written, in
// UTF-8: the payload as PostgreSQL renders it to a UTF-8 client.
func checkEncRecords(t *testing.T, e *env, recs []*kgo.Record, ids []string, evs []encEvent) {
	t.Helper()
	conn := harness.Connect(t, utf8DSN(t, e.DSN))
	defer conn.Close(context.Background())
	byID := map[string]*kgo.Record{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		byID[id] = r
	}
	for i, id := range ids {
		ev := evs[i]
		r, ok := byID[id]
		if !ok {
			t.Errorf("event %s (%+v) not in Kafka", id, ev)
			continue
		}
		var payload string
		if err := conn.QueryRow(context.Background(), `SELECT payload::text FROM outbox WHERE id = $1`, id).Scan(&payload); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(payload, ev.note) {
			t.Fatalf("PostgreSQL renders payload %q, which lacks %q: the test wrote something else", payload, ev.note)
		}
		if !utf8.Valid(r.Value) || string(r.Value) != payload {
			t.Errorf("event %s: value %q (% x), want %q in UTF-8", id, r.Value, r.Value, payload)
		}
		if !utf8.Valid(r.Key) || string(r.Key) != ev.key {
			t.Errorf("event %s: key %q (% x), want %q in UTF-8", id, r.Key, r.Key, ev.key)
		}
		if typ, _ := harness.Header(r, "eventType"); !utf8.ValidString(typ) || typ != ev.typ {
			t.Errorf("event %s: header eventType %q (% x), want %q in UTF-8", id, typ, typ, ev.typ)
		}
	}
}

// waitEncConfirmed waits until the slot's confirmed_flush_lsn has passed the
// commit of xid, as the witness saw it.
func waitEncConfirmed(t *testing.T, e *env, wit *harness.Witness, xid uint32) {
	t.Helper()
	end, ok := wit.CommitEnds(t)[xid]
	if !ok {
		t.Fatalf("the witness slot has no commit of xid %d", xid)
	}
	harness.WaitFor(t, time.Minute, fmt.Sprintf("confirmed_flush_lsn to pass the last commit (%s)", end), func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
}

// TestNonUTF8DatabaseRelaysUTF8: in a LATIN1 and a WIN1252 database, keys,
// headers and payloads with non-ASCII characters reach Kafka as the same
// characters in UTF-8, the slot is confirmed past them, and walrelay check
// passes and names the encoding.
func TestNonUTF8DatabaseRelaysUTF8(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		enc  string
		euro bool
	}{{"LATIN1", false}, {"WIN1252", true}} {
		t.Run(c.enc, func(t *testing.T) {
			t.Parallel()
			e := encodedEnv(t, c.enc)
			var stored string
			if err := e.Bed.QueryRow(t, e.DSN, `SELECT current_setting('server_encoding')`).Scan(&stored); err != nil || stored != c.enc {
				t.Fatalf("server_encoding %q (%v), want %s", stored, err, c.enc)
			}
			out, code := e2etest.RunCmd(t, e, "check", "--header-columns", "type:eventType")
			if code != 0 || !strings.Contains(out, "database encoding") || !strings.Contains(out, c.enc) {
				t.Errorf("walrelay check: exit %d, want 0 with a database encoding check naming %s:\n%s", code, c.enc, out)
			}
			wit := harness.NewWitness(t, &harness.Env{Bed: e.Bed, DSN: utf8DSN(t, e.DSN)})
			col := e.Collect(t)
			relay := e.Start(t)
			relay.WaitStreaming()
			evs := encEvents(c.euro)
			ids, last := writeEncEvents(t, e, evs)
			// N.B. the database holds the characters in its own encoding,
			// not as UTF-8 bytes taken for LATIN1 ones.
			var n int
			if err := e.Bed.QueryRow(t, e.DSN, `SELECT octet_length(aggregateid) FROM outbox WHERE id = $1`, ids[0]).Scan(&n); err != nil || n != len("schlüssel")-1 {
				t.Fatalf("octet_length of the stored key %d (%v), want %d: the test did not write %s text", n, err, len("schlüssel")-1, c.enc)
			}
			col.WaitFor(len(ids), time.Minute)
			waitEncConfirmed(t, e, wit, last)
			checkEncRecords(t, e, col.ToEnd(), ids, evs)
			if code := relay.Stop(time.Minute); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0", code)
			}
		})
	}
}

// TestClientEncodingSettingOverridden: a UTF-8 database whose role or
// database sets client_encoding = 'LATIN1' still reaches Kafka in UTF-8, a
// row with € (which LATIN1 cannot hold) included, and the slot is
// confirmed past every row.
func TestClientEncodingSettingOverridden(t *testing.T) {
	t.Parallel()
	for _, on := range []string{"database", "role"} {
		t.Run(on, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			writer := *e.Env
			writer.DSN = utf8DSN(t, e.DSN)
			switch on {
			case "database":
				e.SetDatabase(t, "client_encoding", "LATIN1")
			case "role":
				role := "wr_" + e.Prefix
				e.Bed.Exec(t, e.DSN, `CREATE ROLE `+role+` LOGIN REPLICATION; ALTER TABLE outbox OWNER TO `+role+
					`; GRANT CREATE ON DATABASE `+e.Database(t)+` TO `+role+`; ALTER ROLE `+role+` SET client_encoding = 'LATIN1'`)
				admin := *e.Env
				t.Cleanup(func() { dropRoles(t, &env{Env: &admin}, role) })
				e.DSN = e2etest.WithUser(t, e.DSN, role, "")
			}
			wit := harness.NewWitness(t, &harness.Env{Bed: e.Bed, DSN: writer.DSN})
			col := e.Collect(t)
			relay := e.Start(t)
			relay.WaitStreaming()
			evs := encEvents(true)
			ids, last := writeEncEvents(t, &env{Env: &writer}, evs)
			col.WaitFor(len(ids), time.Minute)
			waitEncConfirmed(t, e, wit, last)
			checkEncRecords(t, &env{Env: &writer}, col.ToEnd(), ids, evs)
			if code := relay.Stop(time.Minute); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0", code)
			}
		})
	}
}

// TestMessageSourceAndSQLASCIIRefused: the message source on a LATIN1
// database (a message's content is sent unconverted, in the database's
// encoding), and any source on a SQL_ASCII database (PostgreSQL converts
// nothing there), are refused at start with exit 2 and the fix, before a
// slot exists; walrelay check fails on them.
func TestMessageSourceAndSQLASCIIRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		enc, source string
		want        []string
	}{
		{"LATIN1", "messages", []string{`database encoding LATIN1`, `--source messages needs a UTF8 database`, `ENCODING 'UTF8'`}},
		{"LATIN1", "tables,messages", []string{`database encoding LATIN1`, `--source messages needs a UTF8 database`}},
		{"SQL_ASCII", "tables", []string{`database encoding SQL_ASCII`, `ENCODING 'UTF8'`}},
	} {
		t.Run(c.enc+"/"+c.source, func(t *testing.T) {
			t.Parallel()
			e := encodedEnv(t, c.enc)
			out, code := e2etest.RunCmd(t, e, "check", "--source", c.source, "--header-columns", "type:eventType")
			if code == 0 || !strings.Contains(out, "database encoding") {
				t.Errorf("walrelay check --source %s on a %s database: exit %d, want a failed database encoding check:\n%s", c.source, c.enc, code, out)
			}
			// setup creates nothing for a database run would refuse.
			out, code = e2etest.RunCmd(t, e, "setup", "--source", c.source, "--role", "")
			if code != 2 || !strings.Contains(out, c.want[0]) {
				t.Errorf("walrelay setup --source %s on a %s database: exit %d, want 2 saying %q:\n%s", c.source, c.enc, code, c.want[0], out)
			}
			if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
				t.Errorf("a refused setup created slot %s", e.Slot)
			}
			relay := e.Start(t, "--source", c.source)
			if code := relay.Wait(time.Minute); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			for _, w := range c.want {
				if !strings.Contains(relay.Log(), w) {
					t.Errorf("log lacks %q:\n%s", w, relay.Log())
				}
			}
			if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
				t.Errorf("a refused start created slot %s", e.Slot)
			}
		})
	}
}

// TestWalsenderErrorShownEachAttempt: when the walsender fails on a row
// (an EUC_JP character of the user-defined area, which has no UTF-8
// equivalent: 22P05), walrelay restarts from the last confirmed position,
// and every attempt's log line, /readyz and the restart metric carry
// PostgreSQL's error, never only "not held by this stream's walsender";
// the rows before it arrive in UTF-8, and the slot stays before it.
func TestWalsenderErrorShownEachAttempt(t *testing.T) {
	t.Parallel()
	e := encodedEnv(t, "EUC_JP")
	wit := harness.NewWitness(t, &harness.Env{Bed: e.Bed, DSN: e.DSN})
	col := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	evs := []encEvent{{"鍵-key", "確認", "日本語 テキスト"}}
	ids, _ := writeEncEvents(t, e, evs)
	col.WaitFor(len(ids), time.Minute)
	checkEncRecords(t, e, col.Records(), ids, evs)
	// The EUC_JP bytes 0xF5A1 are valid in the database, and have no
	// equivalent in UTF-8.
	bad := e.ExecXid(t, `INSERT INTO outbox VALUES ($1, $2, 'k-bad', 'T', jsonb_build_object('note', convert_from('\xf5a1'::bytea, 'EUC_JP')))`,
		harness.NewUUID(), e.AggType(0))
	attempts := func() []string {
		var lines []string
		for _, l := range strings.Split(relay.Log(), "\n") {
			if strings.Contains(l, "restarting from the last confirmed position") || strings.Contains(l, "start failed, not streamed yet") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	harness.WaitFor(t, 2*time.Minute, "three restarts of walrelay", func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited (%v)", relay.Err())
		}
		return len(attempts()) >= 3
	})
	for _, l := range attempts() {
		if !strings.Contains(l, "22P05") || strings.Contains(l, "not held by this stream's walsender") {
			t.Errorf("a restart's log line does not carry the walsender's error (SQLSTATE 22P05):\n%s", l)
		}
	}
	// N.B. an attempt may hold the slot for an instant before the
	// walsender fails: /readyz is read until it says why it is not ready.
	var code int
	var body string
	harness.WaitFor(t, time.Minute, "/readyz to say not ready with the walsender's error (22P05)", func() bool {
		code, body = relay.Get("/readyz")
		return code != 200 && strings.Contains(body, "22P05") && relay.Metric("walrelay_ready") == 0
	})
	t.Logf("/readyz: %d %s", code, body)
	if got := relay.Metric(`walrelay_restarts_total{cause="postgres"}`); got < 3 {
		t.Errorf(`walrelay_restarts_total{cause="postgres"} = %v, want at least 3`, got)
	}
	e.CheckPending(t, wit, bad, "the row the walsender cannot convert")
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
