package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/outbox"
)

// Partitioned outboxes: the usual way to get retention (drop old
// partitions). pgoutput sends a partition's rows under the partition's name
// unless the publication has publish_via_partition_root; walrelay must relay
// them as the outbox's, or refuse to start.

// partitionedOutbox replaces e's outbox with a partitioned table of the same
// columns plus created_at, partitioned by kind: range (created_at: 2024,
// 2025, default), list (aggregatetype), hash (id, 4 partitions) or range of
// hash (2024 partitioned again by id). It returns the leaf partitions' names.
func partitionedOutbox(t *testing.T, e *env, kind string) []string {
	t.Helper()
	cols := outbox.Columns + `,
		created_at timestamptz NOT NULL DEFAULT now()`
	var ddl string
	var parts []string
	switch kind {
	case "range":
		ddl = `CREATE TABLE outbox (` + cols + `, PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
			CREATE TABLE outbox_2024 PARTITION OF outbox FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
			CREATE TABLE outbox_2025 PARTITION OF outbox FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
			CREATE TABLE outbox_default PARTITION OF outbox DEFAULT;`
		parts = []string{"outbox_2024", "outbox_2025", "outbox_default"}
	case "list":
		ddl = fmt.Sprintf(`CREATE TABLE outbox (`+cols+`, PRIMARY KEY (id, aggregatetype)) PARTITION BY LIST (aggregatetype);
			CREATE TABLE outbox_orders PARTITION OF outbox FOR VALUES IN ('%s');
			CREATE TABLE outbox_customers PARTITION OF outbox FOR VALUES IN ('%s');`, e.AggType(0), e.AggType(1))
		parts = []string{"outbox_orders", "outbox_customers"}
	case "hash":
		ddl = `CREATE TABLE outbox (` + cols + `, PRIMARY KEY (id)) PARTITION BY HASH (id);`
		for i := 0; i < 4; i++ {
			ddl += fmt.Sprintf("\nCREATE TABLE outbox_h%d PARTITION OF outbox FOR VALUES WITH (MODULUS 4, REMAINDER %d);", i, i)
			parts = append(parts, fmt.Sprintf("outbox_h%d", i))
		}
	case "range of hash":
		ddl = `CREATE TABLE outbox (` + cols + `, PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
			CREATE TABLE outbox_2024 PARTITION OF outbox FOR VALUES FROM ('2024-01-01') TO ('2025-01-01') PARTITION BY HASH (id);
			CREATE TABLE outbox_2024_h0 PARTITION OF outbox_2024 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
			CREATE TABLE outbox_2024_h1 PARTITION OF outbox_2024 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
			CREATE TABLE outbox_default PARTITION OF outbox DEFAULT;`
		parts = []string{"outbox_2024_h0", "outbox_2024_h1", "outbox_default"}
	default:
		t.Fatalf("partitioning %q", kind)
	}
	e.Bed.Exec(t, e.DSN, "DROP TABLE outbox;\n"+ddl)
	return parts
}

// outboxWriter commits outbox transactions on one connection and keeps
// each aggregate's seq, so that commit order is program order.
type outboxWriter struct {
	e      *env
	conn   *pgx.Conn
	prefix string // aggregate ids start with it
	seq    map[string]int
	rows   int
	xids   []uint32
}

func newOutboxWriter(t *testing.T, e *env, prefix string) *outboxWriter {
	t.Helper()
	w := &outboxWriter{e: e, conn: harness.Connect(t, e.DSN), prefix: prefix, seq: map[string]int{}}
	t.Cleanup(func() { w.conn.Close(context.Background()) })
	return w
}

// commit writes one transaction of n outbox rows (and a business row), row
// i created at createdAt(i) (a timestamptz literal), and returns its xid.
func (w *outboxWriter) commit(n int, createdAt func(i int) string) (uint32, error) {
	ctx := context.Background()
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO orders (customer, total) VALUES ('c', 1)`); err != nil {
		return 0, err
	}
	for j := 0; j < n; j++ {
		i := w.rows + j
		k := i % 10
		agg := fmt.Sprintf("%s-%d", w.prefix, k)
		w.seq[agg]++
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at)
			VALUES ($1, $2, $3, 'OrderCreated', jsonb_build_object('seq', $4::int, 'i', $5::int), $6::timestamptz)`,
			harness.NewUUID(), w.e.AggType(k), agg, w.seq[agg], i, createdAt(i)); err != nil {
			return 0, err
		}
	}
	var xid int64
	if err := tx.QueryRow(ctx, `SELECT txid_current() % 4294967296`).Scan(&xid); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	w.rows += n
	w.xids = append(w.xids, uint32(xid))
	return uint32(xid), nil
}

// write commits rows outbox rows, perTx to a transaction.
func (w *outboxWriter) write(t *testing.T, rows, perTx int, createdAt func(i int) string) {
	t.Helper()
	for n := 0; n < rows; n += perTx {
		if _, err := w.commit(min(perTx, rows-n), createdAt); err != nil {
			t.Fatalf("write outbox rows: %v", err)
		}
	}
}

// spread puts row i in 2024, 2025 or 2026 (the range outbox's default
// partition), in turn.
func spread(i int) string {
	return fmt.Sprintf("%d-03-%02d 12:00:00+00", 2024+i%3, 1+i%28)
}

// lastCommitEnd is the end of the latest commit record of xids, from the
// witness.
func lastCommitEnd(t *testing.T, wit *harness.Witness, xids []uint32) pglogrepl.LSN {
	t.Helper()
	ends := wit.CommitEnds(t)
	var last pglogrepl.LSN
	for _, x := range xids {
		end, ok := ends[x]
		if !ok {
			t.Fatalf("the witness saw no commit of xid %d", x)
		}
		last = max(last, end)
	}
	return last
}

// waitConfirmed waits until the slot's confirmed_flush_lsn reaches lsn.
func waitConfirmed(t *testing.T, e *env, relay *relayProc, lsn pglogrepl.LSN) {
	t.Helper()
	harness.WaitFor(t, 2*time.Minute, "confirmed_flush_lsn to reach the last commit end "+lsn.String(), func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited: %v", relay.Err())
		}
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= lsn
	})
}

// checkAllRelayed reads the test's topics back to their end offsets and
// checks that every committed row is there exactly once, byte-exact.
func checkAllRelayed(t *testing.T, e *env) {
	t.Helper()
	recs := e.Bed.ConsumeAll(t, e.Topics(), 2*time.Second)
	rows := e.CommittedRows(t)
	if len(recs) != len(rows) {
		t.Errorf("%d records in Kafka for %d committed outbox rows", len(recs), len(rows))
	}
	e2etest.CheckRecords(t, e, recs, rows, nil, 3, false)
}

// checkEveryPartitionUsed fails unless each partition holds rows: the test
// proves nothing for a partition no row went to.
func checkEveryPartitionUsed(t *testing.T, e *env, parts []string) {
	t.Helper()
	for _, p := range parts {
		var n int
		if err := e.Bed.QueryRow(t, e.DSN, `SELECT count(*) FROM `+pgx.Identifier{p}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("partition %s holds no row", p)
		}
	}
}

// TestPartitionedOutboxRelayedCompletely: range, list and hash partitioned
// outboxes, with the publication walrelay creates and with existing ones
// that publish through the root; every committed row arrives exactly once
// and the slot is confirmed up to the last commit. A restart relays what
// follows.
func TestPartitionedOutboxRelayedCompletely(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, kind string
		pub        string // an existing publication (%s: its name); "" for the one walrelay creates
	}{
		{"range", "range", ""},
		{"list", "list", ""},
		{"hash", "hash", ""},
		{"range of hash", "range of hash", ""},
		{"hash, FOR ALL TABLES", "hash", `CREATE PUBLICATION %s FOR ALL TABLES WITH (publish = 'insert', publish_via_partition_root = true)`},
		{"range, root and a partition listed", "range", `CREATE PUBLICATION %s FOR TABLE outbox, outbox_2025 WITH (publish = 'insert', publish_via_partition_root = true)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			parts := partitionedOutbox(t, e, c.kind)
			if c.pub != "" {
				e.Bed.Exec(t, e.DSN, fmt.Sprintf(c.pub, pgx.Identifier{e.Pub}.Sanitize()))
			}
			wit := e.Witness(t)
			relay := e.Start(t)
			relay.WaitStreaming()
			w := newOutboxWriter(t, e, "agg")
			w.write(t, 200, 5, spread)
			checkEveryPartitionUsed(t, e, parts)
			waitConfirmed(t, e, relay, lastCommitEnd(t, wit, w.xids))
			checkAllRelayed(t, e)
			if code := relay.Stop(time.Minute); code != 0 {
				t.Fatalf("walrelay exit code %d after SIGTERM, want 0", code)
			}

			// The publication now exists: a restart accepts it.
			relay = e.Start(t)
			relay.WaitStreaming()
			w.write(t, 40, 4, spread)
			waitConfirmed(t, e, relay, lastCommitEnd(t, wit, w.xids))
			checkAllRelayed(t, e)
			if code := relay.Stop(time.Minute); code != 0 {
				t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
			}
		})
	}
}

// TestPartitionAttachedWhileRunning: partitions created (PARTITION OF) and
// attached (ATTACH PARTITION, with its columns in another order and a
// dropped one) while walrelay streams and a writer commits are relayed.
func TestPartitionAttachedWhileRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `DROP TABLE outbox;
		CREATE TABLE outbox (`+outbox.Columns+`,
			created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
		CREATE TABLE outbox_2024 PARTITION OF outbox FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
		CREATE TABLE outbox_2025 PARTITION OF outbox FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');`)
	wit := e.Witness(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	old := func(i int) string { return fmt.Sprintf("%d-06-01 00:00:00+00", 2024+i%2) }
	w := newOutboxWriter(t, e, "agg")
	w.write(t, 60, 3, old)

	// A second writer commits into the old partitions while the new ones
	// appear.
	bg := newOutboxWriter(t, e, "bg")
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := bg.commit(2, old); err != nil {
				done <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	e.Bed.Exec(t, e.DSN, `CREATE TABLE outbox_2026 PARTITION OF outbox FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')`)
	e.Bed.Exec(t, e.DSN, `CREATE TABLE outbox_2027 (payload jsonb, created_at timestamptz NOT NULL, dropme int, type text NOT NULL,
			aggregateid text NOT NULL, aggregatetype text NOT NULL, id uuid NOT NULL);
		ALTER TABLE outbox_2027 DROP COLUMN dropme;
		ALTER TABLE outbox ATTACH PARTITION outbox_2027 FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');`)
	all := func(i int) string { return fmt.Sprintf("%d-06-01 00:00:00+00", 2024+i%4) }
	w.write(t, 80, 4, all)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("background writer: %v", err)
	}
	if bg.rows == 0 {
		t.Fatalf("the background writer committed nothing while the partitions appeared")
	}
	checkEveryPartitionUsed(t, e, []string{"outbox_2024", "outbox_2025", "outbox_2026", "outbox_2027"})
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, append(w.xids, bg.xids...)))
	checkAllRelayed(t, e)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("FIGURES rows=%d background_rows=%d", w.rows, bg.rows)
}

// viaRootFix is the statement walrelay must name for e's publication.
func viaRootFix(e *env) string {
	return fmt.Sprintf(`ALTER PUBLICATION %s SET (publish_via_partition_root = true);`, pgx.Identifier{e.Pub}.Sanitize())
}

// TestPartitionedOutboxPublicationWithoutViaRoot: an existing publication
// of a partitioned outbox without publish_via_partition_root: walrelay run
// exits 2 with the fix and confirms nothing; walrelay check fails the same
// way. Once the fix is applied, the rows written before it (which pgoutput
// still names after their partitions) and after it are all relayed.
func TestPartitionedOutboxPublicationWithoutViaRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	partitionedOutbox(t, e, "range")
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE outbox WITH (publish = 'insert')`, pgx.Identifier{e.Pub}.Sanitize()))
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	wit := e.Witness(t)
	w := newOutboxWriter(t, e, "agg")
	w.write(t, 200, 5, spread)

	code, out := e2etest.RunOnce(t, nil, e.Args("run")...)
	if code != 2 {
		t.Errorf("walrelay run: exit code %d, want 2; output:\n%s", code, out)
	}
	if !strings.Contains(out, viaRootFix(e)) {
		t.Errorf("walrelay run: output lacks the fix %q:\n%s", viaRootFix(e), out)
	}
	e.CheckPending(t, wit, w.xids[0], "the first outbox transaction")
	code, out = e2etest.RunOnce(t, nil, e.Args("check")...)
	if code != 2 || !strings.Contains(out, "FAIL  publication: ") || !strings.Contains(out, viaRootFix(e)) {
		t.Errorf("walrelay check: exit code %d, want 2 and a FAIL of the publication naming %q:\n%s", code, viaRootFix(e), out)
	}
	e.CheckPending(t, wit, w.xids[0], "the first outbox transaction")
	if t.Failed() {
		t.FailNow()
	}

	e.Bed.Exec(t, e.DSN, viaRootFix(e))
	relay := e.Start(t)
	relay.WaitStreaming()
	w.write(t, 40, 4, spread)
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, w.xids))
	// N.B. the rows after the change were produced but not confirmed
	// before the stop: sent again after the restart, duplicates allowed.
	e2etest.CheckRecords(t, e, e.Bed.ConsumeAll(t, e.Topics(), 2*time.Second), e.CommittedRows(t), nil, 3, true)
	if !strings.Contains(relay.Log(), "arrive under the partition's name") {
		t.Errorf("walrelay's log does not say that rows arrived under partitions' names")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestPartitionedOutboxPublicationChangedWhileRunning: publish_via_partition_root
// turned off under a running walrelay stops it with exit 2 and the fix, as a
// start would, and nothing past the change is confirmed. After the fix the
// rows committed meanwhile (they arrive under the partitions' names) are
// relayed all the same, never counted as another table's.
func TestPartitionedOutboxPublicationChangedWhileRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	partitionedOutbox(t, e, "range")
	wit := e.Witness(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	w := newOutboxWriter(t, e, "agg")
	w.write(t, 30, 3, spread)
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, w.xids))

	pub := pgx.Identifier{e.Pub}.Sanitize()
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`ALTER PUBLICATION %s SET (publish_via_partition_root = false)`, pub))
	before := len(w.xids)
	w.write(t, 120, 4, spread)
	if code := relay.Wait(time.Minute); code != 2 {
		t.Errorf("exit code %d after the change, want 2", code)
	}
	if !strings.Contains(relay.Log(), viaRootFix(e)) {
		t.Errorf("log lacks the fix %q", viaRootFix(e))
	}
	e.CheckPending(t, wit, w.xids[before], "the first transaction after the change")

	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`ALTER PUBLICATION %s SET (publish_via_partition_root = true)`, pub))
	relay = e.Start(t)
	relay.WaitStreaming()
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, w.xids))
	// N.B. the rows after the change were produced but not confirmed
	// before the stop: sent again after the restart, duplicates allowed.
	e2etest.CheckRecords(t, e, e.Bed.ConsumeAll(t, e.Topics(), 2*time.Second), e.CommittedRows(t), nil, 3, true)
	if !strings.Contains(relay.Log(), "arrive under the partition's name") {
		t.Errorf("walrelay's log does not say that rows arrived under partitions' names")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestPartitionedOutboxRefusals: configurations that would relay part of a
// partitioned outbox exit 2 with the fix (walrelay run) and FAIL
// (walrelay check); the publications that publish it whole pass.
func TestPartitionedOutboxRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	partitionedOutbox(t, e, "range of hash")
	// A foreign table can be a partition of a table without a unique index.
	e.Bed.Exec(t, e.DSN, `CREATE TABLE outbox_f (LIKE outbox) PARTITION BY LIST (aggregatetype);
		CREATE FOREIGN DATA WRAPPER fdw_`+e.Prefix+`;
		CREATE SERVER remote_`+e.Prefix+` FOREIGN DATA WRAPPER fdw_`+e.Prefix+`;
		CREATE FOREIGN TABLE outbox_f_remote PARTITION OF outbox_f FOR VALUES IN ('remote') SERVER remote_`+e.Prefix+`;`)
	pub := func(name, sql string) string {
		e.Bed.Exec(t, e.DSN, fmt.Sprintf(sql, name))
		return name
	}
	alter := func(name string) string {
		return fmt.Sprintf(`ALTER PUBLICATION %s SET (publish_via_partition_root = true);`, pgx.Identifier{name}.Sanitize())
	}
	type refusal struct {
		name string
		args []string
		want string // "" passes
	}
	cases := []refusal{
		{"--table names a partition", []string{"--table", "public.outbox_2024_h1"},
			"outbox table public.outbox_2024_h1 is a partition of public.outbox: name the partitioned table, not a partition: --table public.outbox"},
		{"--table names a partition that is partitioned too", []string{"--table", "public.outbox_2024"},
			"outbox table public.outbox_2024 is a partition of public.outbox: name the partitioned table, not a partition: --table public.outbox"},
		{"a foreign-table partition", []string{"--table", "public.outbox_f"},
			`outbox public.outbox_f has foreign-table partitions public.outbox_f_remote, whose rows are stored on another server and never reach this WAL`},
		{"a partition listed, not the outbox", []string{"--publication", pub("p_leaf_"+e.Prefix, `CREATE PUBLICATION %s FOR TABLE outbox_2024 WITH (publish = 'insert', publish_via_partition_root = true)`)},
			`lists partitions public.outbox_2024 of outbox public.outbox but not the table itself, so rows of its other partitions are not published: run ALTER PUBLICATION "p_leaf_` + e.Prefix + `" ADD TABLE "public"."outbox";`},
		{"FOR ALL TABLES without publish_via_partition_root", []string{"--publication", pub("p_all_"+e.Prefix, `CREATE PUBLICATION %s FOR ALL TABLES WITH (publish = 'insert')`)},
			alter("p_all_" + e.Prefix)},
		{"FOR ALL TABLES with publish_via_partition_root", []string{"--publication", pub("p_allok_"+e.Prefix, `CREATE PUBLICATION %s FOR ALL TABLES WITH (publish = 'insert', publish_via_partition_root = true)`)},
			""},
	}
	// N.B. FOR TABLES IN SCHEMA, row filters and column lists are
	// PostgreSQL 15+.
	if serverVersion(t, e) >= 150000 {
		cases = append(cases,
			refusal{"FOR TABLES IN SCHEMA without publish_via_partition_root", []string{"--publication", pub("p_schema_"+e.Prefix, `CREATE PUBLICATION %s FOR TABLES IN SCHEMA public WITH (publish = 'insert')`)},
				alter("p_schema_" + e.Prefix)},
			refusal{"FOR TABLES IN SCHEMA with publish_via_partition_root", []string{"--publication", pub("p_schemaok_"+e.Prefix, `CREATE PUBLICATION %s FOR TABLES IN SCHEMA public WITH (publish = 'insert', publish_via_partition_root = true)`)},
				""},
			// N.B. through the root, the root's filter and column list apply.
			refusal{"a row filter on the outbox", []string{"--publication", pub("p_filter_"+e.Prefix, `CREATE PUBLICATION %s FOR TABLE outbox WHERE (aggregatetype <> 'x') WITH (publish = 'insert', publish_via_partition_root = true)`)},
				`has a row filter on outbox public.outbox (WHERE ((aggregatetype <> 'x'::text)))`},
			refusal{"a column list of the outbox without a mapped column", []string{"--publication", pub("p_cols_"+e.Prefix, `CREATE PUBLICATION %s FOR TABLE outbox (id, aggregatetype, aggregateid, payload, created_at) WITH (publish = 'insert', publish_via_partition_root = true)`)},
				`SET TABLE "public"."outbox" ("id", "aggregatetype", "aggregateid", "payload", "created_at", "type");`})
	} else {
		t.Logf("PostgreSQL %s has no FOR TABLES IN SCHEMA, row filters or column lists (15 and later): those publications cannot exist here", e.Bed.PGVersion())
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := e2etest.RunOnce(t, nil, e.Args("check", c.args...)...)
			if c.want == "" {
				if code != 0 {
					t.Errorf("walrelay check: exit code %d, want 0:\n%s", code, out)
				}
				return
			}
			if code != 2 || !strings.Contains(out, "FAIL  ") || !strings.Contains(out, c.want) {
				t.Errorf("walrelay check: exit code %d, want 2 and a FAIL saying %q:\n%s", code, c.want, out)
			}
			code, out = e2etest.RunOnce(t, nil, e.Args("run", c.args...)...)
			if code != 2 || !strings.Contains(out, c.want) {
				t.Errorf("walrelay run: exit code %d, want 2 and %q:\n%s", code, c.want, out)
			}
		})
	}
	if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
		t.Errorf("a refused start created slot %s", e.Slot)
	}
}

// TestPartitionDroppedBeforeRelayed: retention by dropping partitions. Rows
// of a partition dropped while walrelay was stopped, before it read them,
// are still in the WAL and are relayed.
func TestPartitionDroppedBeforeRelayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	partitionedOutbox(t, e, "range")
	wit := e.Witness(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	w := newOutboxWriter(t, e, "agg")
	w.write(t, 90, 3, spread)
	rows := e.CommittedRows(t)
	var dropped int
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT count(*) FROM outbox_2024`).Scan(&dropped); err != nil {
		t.Fatal(err)
	}
	if dropped == 0 {
		t.Fatalf("no row in the partition to drop")
	}
	e.Bed.Exec(t, e.DSN, `DROP TABLE outbox_2024`)

	relay = e.Start(t)
	waitConfirmed(t, e, relay, lastCommitEnd(t, wit, w.xids))
	recs := e.Bed.ConsumeAll(t, e.Topics(), 2*time.Second)
	if len(recs) != len(rows) {
		t.Errorf("%d records in Kafka for %d committed outbox rows (%d in the dropped partition)", len(recs), len(rows), dropped)
	}
	e2etest.CheckRecords(t, e, recs, rows, nil, 3, false)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
