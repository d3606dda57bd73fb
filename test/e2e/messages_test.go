package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// emitSQL emits one event through walrelay.emit and returns its id.
const emitSQL = `SELECT walrelay.emit($1, $2, 'OrderCreated', $3::jsonb)::text`

// TestMessagesRelayedLikeRows: with --source tables,messages each
// transactional message of prefix outbox written by walrelay.emit (which
// walrelay setup created) becomes the very record an outbox row of the
// same values gives; rows and messages of one transaction keep their
// order; a rolled-back message, non-transactional ones and another
// prefix's are never published (the non-transactional ones counted); bad
// contents are dead-lettered with the raw content; the slot moves past
// everything.
func TestMessagesRelayedLikeRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if out, code := e2etest.RunCmd(t, e, "setup", "--source", "tables,messages", "--role", ""); code != 0 {
		t.Fatalf("walrelay setup exit %d:\n%s", code, out)
	}
	dlq := e.Prefix + ".dlq"
	c := e.Collect(t)
	dc := e.CollectRE(t, "^"+regexp.QuoteMeta(dlq)+"$")
	relay := e.Start(t, "--source", "tables,messages", "--dlq-topic", dlq)
	relay.WaitStreaming()

	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	agg := e.AggType(0)
	inTx := func(do func(tx pgx.Tx)) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		do(tx)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	emit := func(tx pgx.Tx, key, payload string) string {
		t.Helper()
		var id string
		if err := tx.QueryRow(ctx, emitSQL, agg, key, payload).Scan(&id); err != nil {
			t.Fatalf("walrelay.emit: %v", err)
		}
		return id
	}
	insert := func(tx pgx.Tx, key, payload string) string {
		t.Helper()
		id := harness.NewUUID()
		if _, err := tx.Exec(ctx, `INSERT INTO outbox VALUES ($1, $2, $3, 'OrderCreated', $4::jsonb)`, id, agg, key, payload); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// 1. A row and a message of the same values, in one transaction.
	const same = `{"total": 12.50, "lines": [{"sku": "a\"b", "n": 2}], "note": "é ☃"}`
	var rowID, msgID string
	inTx(func(tx pgx.Tx) { rowID, msgID = insert(tx, "k-same", same), emit(tx, "k-same", same) })
	// 2. Rows and messages mixed, one key: commit order and order within.
	var mixed []string
	inTx(func(tx pgx.Tx) {
		for i := 1; i <= 6; i++ {
			p := fmt.Sprintf(`{"seq": %d}`, i)
			if i%2 == 0 {
				mixed = append(mixed, insert(tx, "k-mixed", p))
			} else {
				mixed = append(mixed, emit(tx, "k-mixed", p))
			}
		}
	})
	inTx(func(tx pgx.Tx) { mixed = append(mixed, emit(tx, "k-mixed", `{"seq": 7}`)) }) // message only
	inTx(func(tx pgx.Tx) { mixed = append(mixed, insert(tx, "k-mixed", `{"seq": 8}`)) })
	// 3. Never published: a rolled-back message, non-transactional
	// messages (one of them in the rolled-back transaction), another
	// prefix's message.
	content := func(id string) string {
		return fmt.Sprintf(`{"id": %q, "type": "OrderCreated", "payload": {}, "aggregateid": "k-never", "aggregatetype": %q}`, id, agg)
	}
	never := []string{harness.NewUUID(), harness.NewUUID(), harness.NewUUID(), harness.NewUUID()}
	func() {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'outbox', $1)`, content(never[0])); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(false, 'outbox', $1)`, content(never[1])); err != nil {
			t.Fatal(err)
		}
	}()
	e.Bed.Exec(t, e.DSN, `SELECT pg_logical_emit_message(false, 'outbox', $1::text)`, content(never[2]))
	e.Bed.Exec(t, e.DSN, `SELECT pg_logical_emit_message(true, 'other', $1::text)`, content(never[3]))
	// 4. Poison: not JSON, and a content without a payload, between two
	// good messages of one transaction.
	badJSON := `{"id": "x", "aggregateid": `
	noPayload := fmt.Sprintf(`{"id": "bad-2", "type": "T", "aggregateid": "k-bad", "aggregatetype": %q}`, agg)
	var around []string
	inTx(func(tx pgx.Tx) {
		around = append(around, emit(tx, "k-bad", `{"n": 1}`))
		for _, b := range []string{badJSON, noPayload} {
			if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'outbox', $1::text)`, b); err != nil {
				t.Fatal(err)
			}
		}
		around = append(around, emit(tx, "k-bad", `{"n": 2}`))
	})
	after := e.Bed.CurrentWALLSN(t, e.DSN)

	want := 2 + len(mixed) + len(around)
	c.WaitFor(want, time.Minute)
	dc.WaitFor(2, time.Minute)
	harness.WaitFor(t, 30*time.Second, "the slot to move past the last transaction", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	recs, dead := c.ToEnd(), dc.ToEnd()

	byID := map[string]*kgo.Record{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		if byID[id] != nil {
			t.Errorf("event %s published twice", id)
		}
		byID[id] = r
	}
	if len(recs) != want {
		t.Errorf("%d records, want %d", len(recs), want)
	}
	for _, id := range never {
		if byID[id] != nil {
			t.Errorf("event %s published: it was rolled back, non-transactional or of another prefix", id)
		}
	}
	// The message's record is the row's, but for the id.
	row, msg := byID[rowID], byID[msgID]
	if row == nil || msg == nil {
		t.Fatalf("row record %v, message record %v: want both", row != nil, msg != nil)
	}
	if row.Topic != msg.Topic || row.Partition != msg.Partition || string(row.Key) != string(msg.Key) ||
		string(row.Value) != string(msg.Value) || !row.Timestamp.Equal(msg.Timestamp) {
		t.Errorf("message record %s[%d] key %q value %s at %s\nis not the row's %s[%d] key %q value %s at %s",
			msg.Topic, msg.Partition, msg.Key, msg.Value, msg.Timestamp, row.Topic, row.Partition, row.Key, row.Value, row.Timestamp)
	}
	headers := func(r *kgo.Record) []string {
		var out []string
		for _, h := range r.Headers {
			if h.Key != "id" {
				out = append(out, h.Key+"="+string(h.Value))
			}
		}
		return out
	}
	if hr, hm := headers(row), headers(msg); !slices.Equal(hr, hm) || len(hr) != 1 {
		t.Errorf("message headers %q, row headers %q: want the same eventType header", hm, hr)
	}
	// Commit order and order within a transaction, in the key's partition.
	var order []string
	for _, r := range recs {
		if string(r.Key) == "k-mixed" {
			id, _ := harness.Header(r, "id")
			order = append(order, id)
		}
	}
	if !slices.Equal(order, mixed) {
		t.Errorf("records of k-mixed in order %q, want %q (emitted and inserted in that order)", order, mixed)
	}
	for _, id := range around {
		if byID[id] == nil {
			t.Errorf("good message %s around the poison ones missing", id)
		}
	}
	// The poison messages, dead-lettered with the raw content.
	classes := map[string]string{}
	for _, r := range dead {
		cls, _ := harness.Header(r, "walrelay.error.class")
		tbl, _ := harness.Header(r, "walrelay.source.table")
		if tbl != "message:outbox" {
			t.Errorf("dead letter %s: source table %q, want message:outbox", cls, tbl)
		}
		classes[cls] = string(r.Value)
	}
	wantDead := map[string]string{
		"bad_value":      mustJSON(t, map[string]string{"content": badJSON}),
		"missing_column": mustJSON(t, map[string]string{"content": noPayload}),
	}
	for cls, v := range wantDead {
		if classes[cls] != v {
			t.Errorf("dead letter %s: value %s, want %s", cls, classes[cls], v)
		}
	}
	if got := relay.Metric("walrelay_messages_nontransactional_total"); got != 2 {
		t.Errorf("walrelay_messages_nontransactional_total = %v, want 2", got)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// TestMessagesOnlySource: --source messages needs no outbox table; check
// says so before and after, the publication walrelay creates lists no
// table (business rows beside the messages are not published), and the
// slot is confirmed past the last message.
func TestMessagesOnlySource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `DROP TABLE outbox`)
	out, code := e2etest.RunCmd(t, e, "check", "--source", "messages")
	for _, want := range []string{
		"PASS  outbox tables exist: none: --source messages reads no outbox table",
		`PASS  publication: missing: will be created at start (--create): CREATE PUBLICATION "` + e.Pub + `"`,
		"WARN  message source: function walrelay.emit(",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("walrelay check --source messages (exit %d) does not say %q:\n%s", code, want, out)
		}
	}
	if code != 0 {
		t.Errorf("walrelay check exit %d, want 0:\n%s", code, out)
	}
	c := e.Collect(t)
	relay := e.Start(t, "--source", "messages", "--message-prefix", "ev")
	relay.WaitStreaming()
	var ids []string
	for i := range 3 {
		id := harness.NewUUID()
		ids = append(ids, id)
		// N.B. with a business row: pgoutput looks the publication up at
		// the first row change, and before PostgreSQL 18 stops the
		// stream if it is missing.
		e.Bed.Exec(t, e.DSN, `WITH o AS (INSERT INTO orders (customer, total) VALUES ('c', 1) RETURNING id)
			SELECT pg_logical_emit_message(true, 'ev', json_build_object('id', $1::text, 'aggregatetype', $2::text, 'aggregateid', 'k', 'type', 'T', 'payload', json_build_object('i', $3::int))::text) FROM o`,
			id, e.AggType(0), i)
	}
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	c.WaitFor(3, time.Minute)
	harness.WaitFor(t, 30*time.Second, "the slot to move past the last message", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	var got []string
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		got = append(got, id)
		if want := fmt.Sprintf(`{"i" : %d}`, len(got)-1); string(r.Value) != want {
			t.Errorf("record %s: value %s, want %s (the payload as json_build_object wrote it)", id, r.Value, want)
		}
	}
	if !slices.Equal(got, ids) {
		t.Errorf("records %q, want %q", got, ids)
	}
	var tables int
	e.Bed.QueryRow(t, e.DSN, `SELECT count(*) FROM pg_publication_tables WHERE pubname = $1`, e.Pub).Scan(&tables)
	if tables != 0 {
		t.Errorf("publication %s lists %d tables, want none", e.Pub, tables)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
	out, code = e2etest.RunCmd(t, e, "check", "--source", "messages")
	if want := "PASS  publication: exists; --source messages needs no table in it"; !strings.Contains(out, want) || code != 0 {
		t.Errorf("walrelay check after the run (exit %d) does not say %q:\n%s", code, want, out)
	}
}

// TestMessageNotConfirmedBeforeAck: a transaction of one message that
// cannot be relayed (a poison event with --on-poison halt) is never
// confirmed: walrelay stops before it, and restarted with dead-lettering
// receives it again.
func TestMessageNotConfirmedBeforeAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq := e.Prefix + ".dlq"
	dc := e.CollectRE(t, "^"+regexp.QuoteMeta(dlq)+"$")
	c := e.Collect(t)
	relay := e.Start(t, "--source", "messages", "--on-poison", "halt", "--dlq-topic", dlq)
	relay.WaitStreaming()
	good := func() string {
		id := harness.NewUUID()
		e.Bed.Exec(t, e.DSN, `SELECT pg_logical_emit_message(true, 'outbox', json_build_object('id', $1::text, 'aggregatetype', $2::text, 'aggregateid', 'k', 'type', 'T', 'payload', '{}'::json)::text)`, id, e.AggType(0))
		return id
	}
	first := good()
	c.WaitFor(1, time.Minute)
	// N.B. the message's own LSN: its transaction has no row, so a
	// witness slot without messages never sees it.
	var lsnText string
	e.Bed.QueryRow(t, e.DSN, `SELECT pg_logical_emit_message(true, 'outbox', 'poison')::text`).Scan(&lsnText)
	poisonLSN, err := pglogrepl.ParseLSN(lsnText)
	if err != nil {
		t.Fatal(err)
	}
	second := good()
	if code := relay.Wait(time.Minute); code == 0 {
		t.Fatalf("walrelay exited 0 on a poison message with --on-poison halt")
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.ConfirmedFlushLSN > poisonLSN {
		t.Errorf("confirmed_flush_lsn %s is past the poison message at %s, which was never acknowledged", s.ConfirmedFlushLSN, poisonLSN)
	}
	relay = e.Start(t, "--source", "messages", "--dlq-topic", dlq)
	relay.WaitStreaming()
	dead := dc.WaitFor(1, time.Minute)
	if v := string(dead[0].Value); v != `{"content":"poison"}` {
		t.Errorf("dead letter %s, want the raw content", v)
	}
	recs := c.WaitFor(2, time.Minute)
	var ids []string
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		ids = append(ids, id)
	}
	if !slices.Contains(ids, first) || !slices.Contains(ids, second) {
		t.Errorf("records %q, want %s and %s", ids, first, second)
	}
	relay.Stop(time.Minute)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExactlyOnceMessages is TestExactlyOnce with half the events emitted
// as messages, mixed with outbox rows in the same transactions: a
// read_committed consumer reads each once, each PostgreSQL transaction
// whole in one Kafka transaction, across a graceful restart.
func TestExactlyOnceMessages(t *testing.T) {
	t.Parallel()
	e := harness.NewEnv(t, relayBin)
	e.ExactlyOnce()
	e.RelayArgs = append(e.RelayArgs, "--source", "tables,messages")
	wit := harness.NewWitness(t, e)
	w := &harness.Workload{Writers: 2, Aggregates: 50, MaxTxRows: 6, Rollback: 0.1, Messages: 0.5, Pause: time.Millisecond}
	w.PrepareMessages(t, e)
	w.Prepare(t, e)
	relay := restartMidway(t, e, w, 1500)
	rep, _ := eosHistory(t, e, wit, w)
	var fromMessages int
	e.Bed.QueryRow(t, e.DSN, `SELECT count(*) FROM `+harness.MessageLedger).Scan(&fromMessages)
	if fromMessages == 0 || fromMessages == rep.Events {
		t.Errorf("%d of %d events were messages: the test wants both kinds", fromMessages, rep.Events)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
