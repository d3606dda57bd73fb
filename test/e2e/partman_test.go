package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/outbox"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestPartmanRetentionLosesNothing: an outbox partitioned by pg_partman
// (Debian's postgresql-N-partman, which .ci/run installs, on this
// machine's newest PostgreSQL, Debian 12's 15: a server of the test's own,
// whatever the bed's version), by a bigserial in ranges of interval ids, with partitions made
// ahead and those more than retention ids behind dropped, by
// run_maintenance() called over and over while the writers commit and
// walrelay streams. Every committed event is in Kafka, read back to the end
// offsets; the truth is a ledger table a trigger fills in each row's
// transaction, since the outbox's dropped partitions take their rows with
// them. walrelay check reports the retention, and warns about a time
// retention shorter than the recovery window. WALRELAY_CHAOS: 100,000
// events.
func TestPartmanRetentionLosesNothing(t *testing.T) {
	t.Parallel()
	events, interval, wantMade, wantDropped := 1200, 200, 3, 2
	if os.Getenv("WALRELAY_CHAOS") != "" {
		events, interval, wantMade, wantDropped = 100_000, 10_000, 5, 3
	}
	bed := testbed.Get(t) // its Kafka
	dsn := testbed.StartForTest(t, testbed.Options{PG: true, PGVersion: partmanMajor(t)}).PGURL()
	e := &env{Env: &harness.Env{Bed: bed, Bin: relayBin, DSN: dsn,
		Slot: "s_" + harness.Uniq(), Pub: "p_" + harness.Uniq(), Prefix: "t" + harness.Uniq()}}
	bed.Exec(t, dsn, harness.OutboxDDL)
	bed.Exec(t, dsn, `DROP TABLE outbox;
		CREATE TABLE outbox (`+outbox.Columns+`, n bigserial NOT NULL, PRIMARY KEY (id, n)) PARTITION BY RANGE (n);
		CREATE TABLE `+harness.MessageLedger+` (`+outbox.Columns+`, PRIMARY KEY (id));
		CREATE FUNCTION ledger() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO `+harness.MessageLedger+` (id, aggregatetype, aggregateid, type, payload)
			VALUES (NEW.id, NEW.aggregatetype, NEW.aggregateid, NEW.type, NEW.payload);
			RETURN NULL;
		END $$;
		CREATE TRIGGER ledger AFTER INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION ledger();
		CREATE SCHEMA partman;
		CREATE EXTENSION pg_partman SCHEMA partman`)
	bed.Exec(t, dsn, fmt.Sprintf(`SELECT partman.create_parent(p_parent_table => 'public.outbox', p_control => 'n', p_type => 'native', p_interval => '%d', p_premake => 4)`, interval))
	bed.Exec(t, dsn, fmt.Sprintf(`UPDATE partman.part_config SET retention = '%d', retention_keep_table = false WHERE parent_table = 'public.outbox'`, 2*interval))
	initial := outboxPartitions(t, e)

	// N.B. the writers must not outrun the partitions made ahead: a row
	// in the default partition makes pg_partman's next partition fail.
	w := &harness.Workload{Writers: 2, Events: events, Aggregates: 20, MaxTxRows: 5, Rollback: 0.05, Pause: time.Millisecond}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()

	// pg_partman's maintenance, as its background worker or cron would
	// run it, only more often: in a loop while the writers commit, and
	// once after each interval of events, so that every partition's turn
	// comes on a busy machine too.
	//
	// N.B. one call at a time (mu): run_maintenance returns at once,
	// doing nothing, while another session's call holds its advisory lock
	// (pg_partman 4.7's pg_try_advisory_xact_lock). Overlapping the loop's
	// call, the call after an interval did nothing; on a loaded machine
	// (three test beds at once) the writers outran the partitions made
	// ahead, and the next partition could not be attached over the rows
	// in the default one.
	ctx, cancel := context.WithCancel(context.Background())
	var maint sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	var maintErr error
	maintain := func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if err := testbed.Exec(ctx, dsn, `SELECT partman.run_maintenance('public.outbox')`); err != nil {
			return err
		}
		for _, p := range partitionNames(ctx, dsn) {
			seen[p] = true
		}
		return nil
	}
	maint.Add(1)
	go func() {
		defer maint.Done()
		for ctx.Err() == nil {
			if err := maintain(ctx); err != nil && ctx.Err() == nil {
				maintErr = err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for w.Events = interval; w.Events <= events; w.Events += interval {
		if err := w.Run(t.Context(), e.Env); err != nil {
			cancel()
			t.Fatalf("writers: %v", err)
		}
		if err := maintain(t.Context()); err != nil {
			cancel()
			t.Fatalf("pg_partman maintenance: %v", err)
		}
	}
	cancel()
	maint.Wait()
	if maintErr != nil {
		t.Fatalf("pg_partman maintenance: %v", maintErr)
	}
	final := outboxPartitions(t, e)
	var made, dropped []string
	for p := range seen {
		if !slices.Contains(initial, p) {
			made = append(made, p)
		}
		if !slices.Contains(final, p) {
			dropped = append(dropped, p)
		}
	}
	for _, p := range initial {
		if !slices.Contains(final, p) && !slices.Contains(dropped, p) {
			dropped = append(dropped, p)
		}
	}
	slices.Sort(made)
	slices.Sort(dropped)
	if len(made) < wantMade || len(dropped) < wantDropped {
		t.Errorf("pg_partman made %d partitions (%v) and dropped %d (%v) while walrelay streamed: want at least %d and %d", len(made), made, len(dropped), dropped, wantMade, wantDropped)
	}

	end := bed.CurrentWALLSN(t, dsn)
	harness.WaitFor(t, 5*time.Minute, "the slot to be confirmed past the last commit", func() bool {
		return bed.Slot(t, dsn, e.Slot).ConfirmedFlushLSN >= end
	})
	rows := e.CommittedRows(t)
	var inTable int
	if err := bed.QueryRow(t, dsn, `SELECT count(*) FROM outbox`).Scan(&inTable); err != nil {
		t.Fatal(err)
	}
	v := e2etest.CheckRecords(t, e, c.ToEnd(), rows, w.RolledBack(), 3, false)
	t.Logf("FIGURES events=%d partitions_made=%d partitions_dropped=%d rows_left_in_outbox=%d lost=%d duplicates=%d",
		len(rows), len(made), len(dropped), inTable, v.Lost, v.Duplicates)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}

	// check reports the retention; a time retention shorter than the
	// recovery window is warned about, with the fix.
	out, _ := e2etest.RunCmd(t, e, "check")
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "outbox retention (pg_partman)") {
			t.Logf("walrelay check: %s", l)
		}
	}
	want := fmt.Sprintf("outbox retention (pg_partman): public.outbox by n, %d a partition, 4 made ahead, retention %d (dropped)", interval, 2*interval)
	if !strings.Contains(out, want) || !strings.Contains(out, "WARN  outbox retention (pg_partman): pg_partman drops the partitions of public.outbox more than") {
		t.Errorf("walrelay check does not say %q with its warning:\n%s", want, out)
	}
	bed.Exec(t, dsn, `CREATE TABLE outbox_timed (`+outbox.Columns+`, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`)
	bed.Exec(t, dsn, `SELECT partman.create_parent(p_parent_table => 'public.outbox_timed', p_control => 'created_at', p_type => 'native', p_interval => 'daily')`)
	bed.Exec(t, dsn, `UPDATE partman.part_config SET retention = '2 days', retention_keep_table = false WHERE parent_table = 'public.outbox_timed'`)
	out, _ = e2etest.RunCmd(t, e, "check", "--table", "public.outbox,public.outbox_timed")
	if want := "WARN  outbox retention (pg_partman): pg_partman drops the partitions of public.outbox_timed older than 2 days, less than the recovery window (7 days, --recovery-window) plus --recover-margin (5m0s)"; !strings.Contains(out, want) || !strings.Contains(out, "SET retention = '8 days'") {
		t.Errorf("walrelay check does not say %q with the fix:\n%s", want, out)
	}
	// The window is the user's: 2 days keep a 36 h window plus the
	// margin, not a 48 h one.
	timed := "pg_partman drops the partitions of public.outbox_timed older than 2 days"
	if out, _ := e2etest.RunCmd(t, e, "check", "--table", "public.outbox,public.outbox_timed", "--recovery-window", "36h"); strings.Contains(out, timed) || !strings.Contains(out, "public.outbox_timed by created_at") {
		t.Errorf("walrelay check --recovery-window 36h does not report the retention of 2 days without a warning:\n%s", out)
	}
	if out, _ := e2etest.RunCmd(t, e, "check", "--table", "public.outbox,public.outbox_timed", "--recovery-window", "48h"); !strings.Contains(out, timed+", less than the recovery window (2 days, --recovery-window) plus --recover-margin (5m0s)") || !strings.Contains(out, "SET retention = '3 days'") {
		t.Errorf("walrelay check --recovery-window 48h does not warn that a retention of 2 days misses the margin:\n%s", out)
	}
}

// partmanMajor is the major version of this machine's newest PostgreSQL
// (Debian's layout), the one .ci/run installs pg_partman for; it fails the
// test, with the command that fixes it, when pg_partman is not installed.
func partmanMajor(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	major := 0
	for _, d := range dirs {
		if n, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(d)))); err == nil && n > major {
			major = n
		}
	}
	if major == 0 {
		t.Fatal("no PostgreSQL server under /usr/lib/postgresql: apt-get install -y postgresql")
	}
	if _, err := os.Stat(fmt.Sprintf("/usr/share/postgresql/%d/extension/pg_partman.control", major)); err != nil {
		t.Fatalf("pg_partman is not installed for PostgreSQL %d: apt-get install -y postgresql-%d-partman (.ci/run does): %v", major, major, err)
	}
	return strconv.Itoa(major)
}

// outboxPartitions are the outbox's partitions now.
func outboxPartitions(t *testing.T, e *env) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return partitionNames(ctx, e.DSN)
}

// partitionNames lists the partitions of public.outbox (nil on error:
// the maintenance loop tries again).
func partitionNames(ctx context.Context, dsn string) []string {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'public.outbox'::regclass`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			out = append(out, n)
		}
	}
	return out
}
