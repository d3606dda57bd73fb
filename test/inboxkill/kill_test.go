package inboxkill

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// customers is the number of customer aggregates: each gets many events,
// so their order is checked over long sequences.
const customers = 8

// blockedCustomer's events fail for a while (a constraint): its orders,
// dead-lettered then replayed (TestInboxKill), or its loyalty events, its
// key held (TestInboxKillHoldKey).
const blockedCustomer = "cust-3"

// TestInboxKill runs walrelay and the example consumer (examples/inbox)
// under a workload of the demo's events, kills the consumer with SIGKILL
// once it has made progress, again and again, and walrelay every third
// time, while blockedCustomer's orders fail (dead-lettered); then it fixes
// the cause, replays the dead letters (inbox.Redrive) and checks the
// projection against the outbox table: every committed event applied
// exactly once (count and sum per customer), no event missing or extra,
// each aggregate's events in commit order, the group's offsets at the end
// offsets, every dead letter replayed. The consumer runs with --batch
// (inbox.Config.BatchHandler: a partition's records at hand in one
// transaction, a failed batch handled record by record), partitions in
// parallel and static membership; the time from each consumer kill to its
// restart applying events again is reported (RESULT inbox restart).
// Short: 6 consumer kills (2 with walrelay); WALRELAY_CHAOS=1: 100.
func TestInboxKill(t *testing.T) { killProof(t, false) }

// TestInboxKillHoldKey is TestInboxKill with the consumer's OnFailure
// HoldKey, and blockedCustomer's loyalty events (its own aggregate, in
// order) failing instead of its orders: the customer's key is held (its
// later events wait behind the failed one) while the other customers flow;
// the cause fixed, the held events are applied, in order. Nothing is
// dead-lettered; every check of TestInboxKill holds. One record a
// transaction (no --batch).
func TestInboxKillHoldKey(t *testing.T) { killProof(t, true) }

func killProof(t *testing.T, holdKey bool) {
	long := os.Getenv("WALRELAY_CHAOS") != ""
	consumerKills, relayEvery := 6, 3
	if long {
		consumerKills = 100
	}
	env := harness.NewEnv(t, relayBin)
	b := env.Bed
	b.Exec(t, env.DSN, `CREATE TABLE cust_seq (id text PRIMARY KEY, n bigint NOT NULL DEFAULT 0)`)
	b.Exec(t, env.DSN, `INSERT INTO cust_seq SELECT 'cust-' || i FROM generate_series(0, $1 - 1) i`, customers)
	for _, topic := range env.Topics() {
		b.CreateTopic(t, topic, 3)
	}
	group := "g_" + harness.Uniq()
	dlq := group + ".dlq"

	relay := env.StartRelay(t)
	relay.WaitStreaming()
	consumerArgs := []string{"--batch"}
	if holdKey {
		consumerArgs = []string{"--on-failure", "hold-key"}
	}
	consumer := startConsumer(t, env, group, consumerArgs...)
	held := 0 // "key held" lines in the consumer's logs

	w := &writers{dsn: env.DSN, prefix: env.Prefix}
	wctx, stopWriting := context.WithCancel(context.Background())
	defer stopWriting()
	werr := make(chan error, 1)
	go func() { werr <- w.run(wctx, 4) }()

	check := harness.Connect(t, env.DSN)
	defer check.Close(context.Background())
	applied := func() int64 {
		var n int64
		if err := check.QueryRow(context.Background(), `SELECT count(*) FROM event_log`).Scan(&n); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // the consumer has not created it yet
				return 0
			}
			t.Fatalf("count event_log: %v", err)
		}
		return n
	}

	// N.B. a cause of failure for a while: once the consumer created its
	// tables, the orders of customer blockedCustomer past its current
	// count violate a constraint, so their OrderCreated events fail (with
	// --max-attempts 1, dead-lettered at once); dropped at the end, when
	// the dead letters are replayed. The customer's loyalty events (the
	// ordered aggregate) do not touch orders and keep flowing.
	harness.WaitFor(t, 2*time.Minute, "the consumer's tables", func() bool { return applied() > 0 })
	column := "orders"
	if holdKey {
		column = "loyalty_events"
	}
	var blockedAt int64
	if err := check.QueryRow(context.Background(), `SELECT coalesce((SELECT `+column+` FROM customer_totals WHERE customer = $1), 0)`, blockedCustomer).Scan(&blockedAt); err != nil {
		t.Fatal(err)
	}
	b.Exec(t, env.DSN, fmt.Sprintf(`ALTER TABLE customer_totals ADD CONSTRAINT inboxkill_blocked CHECK (customer <> '%s' OR %s <= %d) NOT VALID`, blockedCustomer, column, blockedAt))

	start := time.Now()
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 1))
	relayKills := 0
	var restarts []time.Duration // consumer kill -9 to the restart's first effect
	for k := 1; k <= consumerKills; k++ {
		// N.B. each kill comes after the consumer applied new events
		// since its start, and a random moment later: it hits the
		// consumer while it handles records, not while it starts.
		before := applied()
		harness.WaitFor(t, 2*time.Minute, "the consumer to apply new events", func() bool {
			if consumer.Exited() {
				t.Fatalf("the consumer exited: %v", consumer.Err())
			}
			return applied() > before
		})
		time.Sleep(time.Duration(rng.IntN(700)) * time.Millisecond)
		consumer.Kill()
		killed := time.Now()
		// N.B. the count at the kill is read once the killed process's
		// sessions are gone: a commit it sent just before may land after
		// the kill, and is not the restart's.
		harness.WaitFor(t, time.Minute, "the killed consumer's sessions to end", func() bool {
			var n int
			if err := check.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, consumerApp).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
		atKill := applied()
		held += strings.Count(consumer.Log(), "key held")
		if k%relayEvery == 0 {
			relay.Kill()
			relayKills++
			relay = env.StartRelay(t)
		}
		select {
		case err := <-werr:
			t.Fatalf("workload: %v", err)
		default:
		}
		consumer = startConsumer(t, env, group, consumerArgs...)
		if k%relayEvery != 0 {
			// N.B. timed only where walrelay kept running: records keep
			// coming, so the first new effect is the restart handling
			// its partitions again.
			restarts = append(restarts, untilApplying(t, consumer, killed, func() bool { return applied() > atKill }))
		}
	}
	stopWriting()
	if err := <-werr; err != nil {
		t.Fatalf("workload: %v", err)
	}
	writing := time.Since(start)

	// walrelay relays everything committed (the slot confirmed past the
	// last commit) and stops; then the consumer catches up with the end
	// offsets (committed, or nothing more for 30 s: verify names what is
	// missing) and stops. N.B. in this order the consumer's SIGTERM cannot
	// interrupt a batch of late duplicates from walrelay.
	var walEnd string
	if err := check.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&walEnd); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 3*time.Minute, "walrelay to confirm the slot past the last commit", func() bool {
		if relay.Exited() {
			t.Fatalf("walrelay exited: %v", relay.Err())
		}
		var done bool
		if err := check.QueryRow(context.Background(), `SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2`,
			walEnd, env.Slot).Scan(&done); err != nil {
			t.Fatalf("read slot %s: %v", env.Slot, err)
		}
		return done
	})
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exited %d after SIGTERM", code)
	}
	catchUp := func() {
		var last int
		lastChange := time.Now()
		harness.WaitFor(t, 10*time.Minute, "the consumer to commit the end offsets", func() bool {
			if consumer.Exited() {
				t.Fatalf("the consumer exited: %v", consumer.Err())
			}
			behind := len(offsetsBehind(t, env, group))
			if behind != last {
				last, lastChange = behind, time.Now()
			}
			return behind == 0 || time.Since(lastChange) > 30*time.Second
		})
	}
	var replayed int64
	if holdKey {
		// The cause fixed: the held key is released at its next retry.
		b.Exec(t, env.DSN, `ALTER TABLE customer_totals DROP CONSTRAINT inboxkill_blocked`)
		catchUp()
	} else {
		catchUp()
		// The cause fixed, every dead letter replayed as the docs say
		// (inbox.Redrive, produced to the original topic): each is
		// applied once, a second dead letter of one id (the consumer
		// killed before its offset commit) being a duplicate.
		b.Exec(t, env.DSN, `ALTER TABLE customer_totals DROP CONSTRAINT inboxkill_blocked`)
		replayed = replayDeadLetters(t, env, dlq)
		catchUp()
	}
	held += strings.Count(consumer.Log(), "key held")
	if code := consumer.Stop(time.Minute); code != 0 {
		t.Fatalf("the consumer exited %d after SIGTERM", code)
	}

	r := verify(t, env, check, group, dlq)
	r.replayed = replayed
	r.kills, r.relayKills, r.writing = consumerKills, relayKills, writing
	t.Logf("RESULT inbox kill: %d events committed (%d transactions rolled back) in %s; %d consumer kills -9, %d walrelay kills -9; "+
		"records in Kafka %d (%d duplicates: walrelay restarts, replayed dead letters); duplicates delivered to the consumer (conflict path) %d; "+
		"effects applied twice %d, missing %d, extra %d, out of order %d; customer %s's %s blocked: dead-lettered %d, replayed %d, key held %d times",
		r.events, w.rolledBack.Load(), r.writing.Round(time.Second), r.kills, r.relayKills,
		r.records, r.records-r.distinct, r.dupSeen, r.twice, r.missing, r.extra, r.disorder, blockedCustomer, column, r.deadLettered, r.replayed, held)
	reportRestarts(t, restarts)
	if r.twice != 0 || r.missing != 0 || r.extra != 0 || r.disorder != 0 {
		t.Errorf("the projection is not every committed event exactly once in order (see RESULT)")
	}
	switch {
	case holdKey && (r.deadLettered != 0 || held == 0):
		t.Errorf("%d dead letters, key held %d times: want the blocked customer's key held, nothing dead-lettered", r.deadLettered, held)
	case !holdKey && (r.deadLettered == 0 || r.replayed != r.deadLettered):
		t.Errorf("%d dead letters, %d replayed: want the blocked customer's orders dead-lettered, and all replayed", r.deadLettered, r.replayed)
	}
	if r.dupSeen == 0 {
		// N.B. the proof needs the conflict path exercised: with this many
		// kills some handled record's offset is always uncommitted.
		t.Errorf("no duplicate reached the consumer: the kills did not exercise the inbox table")
	}
}

// consumerApp is the consumer's application_name: its sessions in
// pg_stat_activity.
const consumerApp = "inboxkill-consumer"

func startConsumer(t *testing.T, env *harness.Env, group string, more ...string) *harness.Relay {
	t.Helper()
	return harness.StartProcess(t, consumerBin, nil, append([]string{
		"--pg-url", harness.DSNVia(t, env.DSN, "", map[string]string{"application_name": consumerApp}), "--brokers", strings.Join(env.Bed.Brokers(), ","),
		"--group", group, "--topics", strings.Join(env.Topics(), ","),
		// N.B. static membership: the restarted consumer takes the
		// partitions back at once, not after the killed one's session
		// timeout.
		"--instance-id", "inboxkill-0", "--session-timeout", "10s",
		// N.B. the blocked customer's orders dead-lettered at once, not
		// after retries that would stall their partitions.
		"--max-attempts", "1",
	}, more...))
}

type report struct {
	events, records, distinct, dupSeen int64
	twice, missing, extra, disorder    int64
	deadLettered, replayed             int64
	kills, relayKills                  int
	writing                            time.Duration
}

// verify compares the projection with the outbox table, reads the topics
// back and the group's offsets, and fails on every mismatch it can name.
func verify(t *testing.T, env *harness.Env, db *pgx.Conn, group, dlq string) report {
	t.Helper()
	ctx := context.Background()
	var r report
	if err := db.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&r.events); err != nil {
		t.Fatal(err)
	}
	// Per customer: orders, their total, loyalty events — from the outbox
	// and from the projection, compared as text (numeric, exact).
	want := totals(t, db, `SELECT c, sum(orders)::text, sum(total)::text, sum(loyalty)::text FROM (
		SELECT payload->>'customer' c, 1 orders, (payload->>'total')::numeric total, 0 loyalty FROM outbox WHERE type = 'OrderCreated'
		UNION ALL
		SELECT aggregateid, 0, 0, 1 FROM outbox WHERE type = 'CustomerLoyaltyReached') e GROUP BY c`)
	got := totals(t, db, `SELECT customer, orders::text, total::text, loyalty_events::text FROM customer_totals`)
	for c, w := range want {
		if got[c] != w {
			t.Errorf("customer %s: projection (orders, total, loyalty) = %v, outbox = %v", c, got[c], w)
		}
	}
	for c, g := range got {
		if _, ok := want[c]; !ok {
			t.Errorf("customer %s in the projection %v, not in the outbox", c, g)
		}
	}
	// Every event once, none missing, none extra.
	q := func(sql string) int64 {
		var n int64
		if err := db.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	r.twice = q(`SELECT count(*) - count(DISTINCT event_id) FROM event_log`)
	r.missing = q(`SELECT count(*) FROM outbox o WHERE NOT EXISTS (SELECT 1 FROM event_log l WHERE l.event_id = o.id::text)`)
	r.extra = q(`SELECT count(*) FROM event_log l WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id::text = l.event_id)`)
	if n := q(`SELECT count(*) FROM inbox_processed WHERE consumer = '` + group + `'`); n != r.events {
		t.Errorf("inbox_processed holds %d ids of group %s, want %d (one per committed event)", n, group, r.events)
	}
	// Order: each aggregate's events, in the order they were applied, carry
	// seq 1, 2, 3... (the writers take seq under the aggregate's row lock,
	// so seq order is commit order).
	rows, err := db.Query(ctx, `SELECT l.aggregateid, (o.payload->>'seq')::bigint FROM event_log l JOIN outbox o ON o.id::text = l.event_id
		WHERE o.type = 'CustomerLoyaltyReached' ORDER BY l.pos`)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for rows.Next() {
		var agg string
		var seq int64
		if err := rows.Scan(&agg, &seq); err != nil {
			t.Fatal(err)
		}
		if seq != last[agg]+1 {
			if r.disorder < 5 {
				t.Errorf("aggregate %s: seq %d applied after %d", agg, seq, last[agg])
			}
			r.disorder++
		}
		last[agg] = seq
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var dup int64
	if err := db.QueryRow(ctx, `SELECT coalesce((SELECT value FROM consumer_stats WHERE name = 'duplicates_seen'), 0)`).Scan(&dup); err != nil {
		t.Fatal(err)
	}
	r.dupSeen = dup

	// Kafka: the records walrelay produced (with its duplicates), the
	// dead-letter topic, and the group's offsets against the end offsets.
	recs := env.Bed.ConsumeAll(t, env.Topics(), 2*time.Second)
	ids := map[string]bool{}
	for _, rec := range recs {
		id, _ := harness.Header(rec, "id")
		ids[id] = true
	}
	r.records, r.distinct = int64(len(recs)), int64(len(ids))
	if r.distinct != r.events {
		t.Errorf("Kafka holds %d distinct ids, the outbox %d events", r.distinct, r.events)
	}
	r.deadLettered = int64(len(env.Bed.ConsumeAll(t, []string{dlq}, time.Second)))
	checkOffsets(t, env, group)
	return r
}

func totals(t *testing.T, db *pgx.Conn, sql string) map[string][3]string {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][3]string{}
	for rows.Next() {
		var c string
		var v [3]string
		if err := rows.Scan(&c, &v[0], &v[1], &v[2]); err != nil {
			t.Fatal(err)
		}
		out[c] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkOffsets fails unless the group's committed offset of every
// partition is its end offset.
func checkOffsets(t *testing.T, env *harness.Env, group string) {
	t.Helper()
	if bad := offsetsBehind(t, env, group); len(bad) > 0 {
		t.Errorf("group %s offsets not at the end: %v", group, bad)
	}
}

// offsetsBehind lists the partitions whose committed offset is not the end
// offset.
func offsetsBehind(t *testing.T, env *harness.Env, group string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := testbed.ListEndOffsets(ctx, cl, false, env.Topics()...)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for topic, ps := range ends {
		for p, end := range ps {
			c, ok := committed.Lookup(topic, p)
			if end > 0 && (!ok || c.At != end) {
				bad = append(bad, fmt.Sprintf("%s/%d committed %d, end %d", topic, p, c.At, end))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// writers write the demo's transactions: an order row, its OrderCreated
// event (aggregate: the order) and a CustomerLoyaltyReached event
// (aggregate: the customer, seq = the customer's order count); one in ten
// transactions rolls back.
type writers struct {
	dsn, prefix string
	rolledBack  atomic.Int64
}

func (w *writers) run(ctx context.Context, n int) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.writer(ctx, mrand.New(mrand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

var errRollback = errors.New("rolled back on purpose")

func (w *writers) writer(ctx context.Context, rng *mrand.Rand) error {
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for ctx.Err() == nil {
		cust := fmt.Sprintf("cust-%d", rng.IntN(customers))
		total := fmt.Sprintf("%d.%02d", rng.IntN(500), rng.IntN(100))
		rollback := rng.IntN(10) == 0
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var seq, order int64
			if err := tx.QueryRow(ctx, `UPDATE cust_seq SET n = n + 1 WHERE id = $1 RETURNING n`, cust).Scan(&seq); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `INSERT INTO orders (customer, total) VALUES ($1, $2::numeric) RETURNING id`, cust, total).Scan(&order); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO outbox VALUES (gen_random_uuid(), $1, $2::bigint::text, 'OrderCreated',
				jsonb_build_object('orderId', $2::bigint, 'customer', $3::text, 'total', $4::numeric))`,
				w.prefix+"_order", order, cust, total); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO outbox VALUES (gen_random_uuid(), $1, $2, 'CustomerLoyaltyReached',
				jsonb_build_object('orders', $3::bigint, 'seq', $3::bigint))`, w.prefix+"_customer", cust, seq); err != nil {
				return err
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		switch {
		case errors.Is(err, errRollback):
			w.rolledBack.Add(1)
		case err != nil && ctx.Err() != nil:
			// N.B. stopped mid-transaction: committed or not, the outbox
			// table says.
			return nil
		case err != nil:
			return fmt.Errorf("write: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// replayDeadLetters produces every record of the dead-letter topic again to
// its original topic (inbox.Redrive) and returns how many.
func replayDeadLetters(t *testing.T, env *harness.Env, dlq string) int64 {
	t.Helper()
	dls := env.Bed.ConsumeAll(t, []string{dlq}, time.Second)
	var recs []*kgo.Record
	for _, dl := range dls {
		r, err := inbox.Redrive(dl, "")
		if err != nil {
			t.Fatalf("redrive %v: %v", dl.Headers, err)
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return 0
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("replay dead letters: %v", err)
	}
	return int64(len(recs))
}

// untilApplying waits, polling every 10 ms, until applied says the restarted
// consumer applied an event, and returns the time since killed.
func untilApplying(t *testing.T, consumer *harness.Relay, killed time.Time, applied func() bool) time.Duration {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !applied() {
		if consumer.Exited() {
			t.Fatalf("the consumer exited: %v", consumer.Err())
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out after 2m waiting for the restarted consumer to apply an event")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(killed)
}

// reportRestarts logs the restart times: a figure, not a threshold.
func reportRestarts(t *testing.T, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	t.Logf("RESULT inbox restart (from the kill proof): consumer kill -9 to the restarted consumer applying events again (static membership, process start included; timed from the kill, the count read once its sessions ended), %d kills: min %s, median %s, max %s",
		len(ds), ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}
