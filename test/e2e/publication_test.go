package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// Publication row filters and column lists (PostgreSQL 15+): pgoutput
// applies them before walrelay sees a row, so neither shows in the stream.
// A row filter on an outbox relays part of it; a column list without a
// mapped column makes every row a poison event. walrelay refuses both at
// start, with the ALTER PUBLICATION that fixes them, and accepts the
// publications that send every row with every mapped column.

// createPublication runs ddl, a CREATE PUBLICATION with a row filter or a
// column list, and reports whether the server has them. Before PostgreSQL
// 15 the test instead requires ddl to be a syntax error: the configuration
// cannot exist there, so there is nothing to refuse.
func createPublication(t *testing.T, e *env, ddl string) bool {
	t.Helper()
	version := serverVersion(t, e)
	if version >= 150000 {
		e.Bed.Exec(t, e.DSN, ddl)
		return true
	}
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(context.Background())
	_, err := conn.Exec(context.Background(), ddl)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42601" {
		t.Fatalf("PostgreSQL %d: %s: got %v, want a syntax error (SQLSTATE 42601): row filters and column lists are PostgreSQL 15+", version, ddl, err)
	}
	t.Logf("PostgreSQL %d has no row filters or column lists (%s is a syntax error): nothing to refuse", version, ddl)
	return false
}

// serverVersion is the server_version_num of e's server (150004 for 15.4).
func serverVersion(t *testing.T, e *env) int {
	t.Helper()
	var version int
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	return version
}

// withCreatedAt adds outboxWriter's created_at column to e's plain outbox.
func withCreatedAt(t *testing.T, e *env) {
	t.Helper()
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN created_at timestamptz NOT NULL DEFAULT now()`)
}

// checkRefused waits until walrelay exits or confirms the slot past the
// last commit of xids. It must exit 2 naming fix, with the first of xids
// still pending.
func checkRefused(t *testing.T, e *env, relay *relayProc, wit *harness.Witness, xids []uint32, fix string) {
	t.Helper()
	last := lastCommitEnd(t, wit, xids)
	harness.WaitFor(t, time.Minute, "walrelay to exit, or to confirm the slot past the last commit "+last.String(), func() bool {
		return relay.Exited() || e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= last
	})
	if !relay.Exited() {
		recs := e.Bed.ConsumeAll(t, e.Topics(), 2*time.Second)
		t.Errorf("walrelay streams instead of exiting 2: confirmed_flush_lsn %s is past the last commit %s, and the topics hold %d records of the %d committed outbox rows",
			e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN, last, len(recs), len(e.CommittedRows(t)))
		relay.Stop(time.Minute)
		t.FailNow()
	}
	if code := relay.Wait(time.Minute); code != 2 {
		t.Errorf("walrelay run: exit code %d, want 2", code)
	}
	if !strings.Contains(relay.Log(), fix) {
		t.Errorf("walrelay run: log lacks the fix %q", fix)
	}
	e.CheckPending(t, wit, xids[0], "the first outbox transaction")
	code, out := e2etest.RunOnce(t, nil, e.Args("check")...)
	if code != 2 || !strings.Contains(out, "FAIL  publication: ") || !strings.Contains(out, fix) {
		t.Errorf("walrelay check: exit code %d, want 2 and a FAIL of the publication naming %q:\n%s", code, fix, out)
	}
	e.CheckPending(t, wit, xids[0], "the first outbox transaction")
	if t.Failed() {
		t.FailNow()
	}
}

// TestPublicationRowFilterRefused: an existing slot whose publication got a
// row filter on the outbox (another table's filter is no concern): walrelay
// run exits 2 with the ALTER PUBLICATION that drops the outbox's filter and
// keeps the other's, confirms nothing, and walrelay check fails the same
// way. After the fix every row committed since is relayed; the rows the
// filter left out before it stay left out, as the message says.
func TestPublicationRowFilterRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	withCreatedAt(t, e)
	pub := pgx.Identifier{e.Pub}.Sanitize()
	if !createPublication(t, e, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE outbox WHERE (aggregatetype <> '%s'), orders WHERE (total > 0) WITH (publish = 'insert')`, pub, e.AggType(1))) {
		return
	}
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	wit := e.Witness(t)
	w := newOutboxWriter(t, e, "agg")
	w.write(t, 40, 2, spread)
	left := map[string]bool{} // rows the filter leaves out
	for id, r := range e.CommittedRows(t) {
		if r.AggType == e.AggType(1) {
			left[id] = true
		}
	}
	if len(left) == 0 {
		t.Fatalf("no row the filter leaves out")
	}

	fix := fmt.Sprintf(`ALTER PUBLICATION %s SET TABLE "public"."orders" WHERE ((total > (0)::numeric)), "public"."outbox";`, pub)
	checkRefused(t, e, e.Start(t), wit, w.xids, fix)

	e.Bed.Exec(t, e.DSN, fix)
	relay := e.Start(t)
	relay.WaitStreaming()
	// N.B. aggregates of their own: those of the first writer lack the
	// events the filter left out.
	after := newOutboxWriter(t, e, "fixed")
	after.write(t, 40, 2, spread)
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, after.xids))
	recs := e.Bed.ConsumeAll(t, e.Topics(), 2*time.Second)
	rows := e.CommittedRows(t)
	for id := range left {
		delete(rows, id)
	}
	e2etest.CheckRecords(t, e, recs, rows, nil, 3, false)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("FIGURES rows=%d left_out_before_fix=%d records=%d", w.rows+after.rows, len(left), len(recs))
}

// TestPublicationColumnListRefused: an existing slot whose publication
// lists the outbox's columns without the header column type: walrelay run
// exits 2 with the ALTER PUBLICATION that adds it, and confirms nothing;
// walrelay check fails the same way. After the fix the rows committed
// before it are dead-lettered (they were decoded without the column, as the
// message says) and every row since is relayed.
func TestPublicationColumnListRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	withCreatedAt(t, e)
	pub := pgx.Identifier{e.Pub}.Sanitize()
	if !createPublication(t, e, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE outbox (id, aggregatetype, aggregateid, payload) WITH (publish = 'insert')`, pub)) {
		return
	}
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	wit := e.Witness(t)
	w := newOutboxWriter(t, e, "agg")
	w.write(t, 20, 2, spread)
	before := e.CommittedRows(t)

	dlq := e.Prefix + ".dlq"
	fix := fmt.Sprintf(`ALTER PUBLICATION %s SET TABLE "public"."outbox" ("id", "aggregatetype", "aggregateid", "payload", "type");`, pub)
	checkRefused(t, e, e.Start(t, "--dlq-topic", dlq), wit, w.xids, fix)

	e.Bed.Exec(t, e.DSN, fix)
	relay := e.Start(t, "--dlq-topic", dlq)
	relay.WaitStreaming()
	after := newOutboxWriter(t, e, "fixed")
	after.write(t, 20, 2, spread)
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, after.xids))
	rows := e.CommittedRows(t)
	for id := range before {
		delete(rows, id)
	}
	e2etest.CheckRecords(t, e, e.Bed.ConsumeAll(t, e.Topics(), 2*time.Second), rows, nil, 3, false)
	dead := map[string]bool{}
	for _, r := range e.Bed.ConsumeAll(t, []string{dlq}, 2*time.Second) {
		// N.B. the value is the row as JSON: the id header needs the
		// event mapped, which a poison event is not.
		var row struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(r.Value, &row); err != nil {
			t.Errorf("dead-letter record at offset %d: value %q: %v", r.Offset, r.Value, err)
		}
		id := row.ID
		cls, _ := harness.Header(r, "walrelay.error.class")
		if before[id].ID == "" || cls != "missing_column" {
			t.Errorf("dead-letter record %s (class %q): want only the rows committed before the fix, class missing_column", id, cls)
		}
		dead[id] = true
	}
	if len(dead) != len(before) {
		t.Errorf("%d of the %d rows committed before the fix are in the dead-letter topic", len(dead), len(before))
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestPublicationFiltersThatRelayEverything: publications with a row
// filter or a column list that still send every outbox row with every
// mapped column pass walrelay check and are relayed completely. A column
// list that leaves out a wide unmapped column keeps it out of the stream
// (read from a second pgoutput slot).
func TestPublicationFiltersThatRelayEverything(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, pub string // pub: %[1]s the publication, %[2]s an aggregate type a filter would leave out
		wide      bool   // rows carry a wide unmapped column
	}{
		{"column list of the mapped columns, without a wide one", `CREATE PUBLICATION %[1]s FOR TABLE outbox (id, aggregatetype, aggregateid, type, payload) WITH (publish = 'insert')`, true},
		{"row filter on another table only", `CREATE PUBLICATION %[1]s FOR TABLE outbox, orders WHERE (total > 1000) WITH (publish = 'insert')`, false},
		{"outbox's row filter, schema published too", `CREATE PUBLICATION %[1]s FOR TABLES IN SCHEMA public, TABLE outbox WHERE (aggregatetype <> '%[2]s') WITH (publish = 'insert')`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			withCreatedAt(t, e)
			if c.wide {
				// N.B. random hex does not compress away: the column is
				// TOASTed out of line, 64 KB a row.
				e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN wide text;
					CREATE FUNCTION widen() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN NEW.wide := (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 2000)); RETURN NEW; END $$;
					CREATE TRIGGER widen BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION widen();`)
			}
			if !createPublication(t, e, fmt.Sprintf(c.pub, pgx.Identifier{e.Pub}.Sanitize(), e.AggType(1))) {
				return
			}
			peek := e.Slot + "_peek"
			e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, peek)
			t.Cleanup(func() { e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, peek) })
			if code, out := e2etest.RunOnce(t, nil, e.Args("check")...); code != 0 {
				t.Errorf("walrelay check: exit code %d, want 0:\n%s", code, out)
			}
			wit := e.Witness(t)
			relay := e.Start(t)
			relay.WaitStreaming()
			w := newOutboxWriter(t, e, "agg")
			w.write(t, 40, 2, spread)
			waitConfirmed(t, e, relay, lastCommitEnd(t, wit, w.xids))
			checkAllRelayed(t, e)
			if code := relay.Stop(time.Minute); code != 0 {
				t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
			}
			if !c.wide {
				return
			}
			var inserts, longest, wide int
			if err := e.Bed.QueryRow(t, e.DSN, `SELECT count(*), coalesce(max(length(data)), 0),
					(SELECT min(length(wide)) FROM outbox)
				FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)
				WHERE get_byte(data, 0) = ascii('I')`, peek, e.Pub).Scan(&inserts, &longest, &wide); err != nil {
				t.Fatal(err)
			}
			if inserts != w.rows || longest >= wide {
				t.Errorf("pgoutput sent %d inserts for %d rows, the longest %d bytes: want every row, each shorter than its %d-byte wide column", inserts, w.rows, longest, wide)
			}
			t.Logf("FIGURES inserts=%d longest_insert_bytes=%d wide_column_bytes=%d", inserts, longest, wide)
		})
	}
}
