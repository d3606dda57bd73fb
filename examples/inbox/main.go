package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
)

// Schema is the projection; the inbox table comes from inbox.CreateTable.
const Schema = `
CREATE TABLE IF NOT EXISTS customer_totals (
  customer       text    PRIMARY KEY,
  orders         bigint  NOT NULL DEFAULT 0,
  total          numeric NOT NULL DEFAULT 0,
  loyalty_events bigint  NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS event_log (
  pos         bigserial PRIMARY KEY,
  event_id    text NOT NULL,
  aggregateid text NOT NULL,
  type        text NOT NULL
);
CREATE TABLE IF NOT EXISTS consumer_stats (
  name  text   PRIMARY KEY,
  value bigint NOT NULL
);`

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("inbox", flag.ContinueOnError)
	pgURL := fs.String("pg-url", os.Getenv("WALRELAY_TEST_PG_URL"), "PostgreSQL URL of the projection's database")
	brokers := fs.String("brokers", envOr("WALRELAY_TEST_KAFKA_BROKERS", "localhost:9092"), "Kafka brokers, comma-separated")
	group := fs.String("group", "demo-projection", "Kafka consumer group (and the inbox table's consumer column)")
	topics := fs.String("topics", "outbox.event.order,outbox.event.customer", "topics to consume, comma-separated")
	instance := fs.String("instance-id", "", "static group membership id: a restarted process takes its partitions back at once instead of after the session timeout (default: the host name; - for dynamic membership)")
	session := fs.Duration("session-timeout", 45*time.Second, "Kafka group session timeout")
	attempts := fs.Int("max-attempts", 5, "handler attempts before a record fails for good")
	onFailure := fs.String("on-failure", "dead-letter", "what a record that fails for good does: dead-letter, hold-key (its key's later records wait behind it) or halt (its partition waits)")
	retain := fs.Duration("retain", 7*24*time.Hour, "delete processed ids older than this at start (0: keep)")
	batch := fs.Bool("batch", false, "apply the records of a partition at hand in one transaction (inbox.Config.BatchHandler); a failed batch is handled record by record")
	debug := fs.Bool("debug", false, "debug logging")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	policy, ok := map[string]inbox.FailurePolicy{"dead-letter": inbox.DeadLetter, "hold-key": inbox.HoldKey, "halt": inbox.Halt}[*onFailure]
	if !ok {
		fmt.Fprintf(os.Stderr, "inbox: --on-failure %q: want dead-letter, hold-key or halt\n", *onFailure)
		return 2
	}
	// N.B. log/slog: package inbox takes any Logger (Config.Logger); a
	// *slog.Logger is one as it is.
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *pgURL == "" {
		log.Error("--pg-url is required")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(code int, what string, err error) int {
		if ctx.Err() != nil { // stopped while setting up: a clean exit
			return 0
		}
		log.Error(what, "error", err)
		return code
	}
	pool, err := pgxpool.New(ctx, *pgURL)
	if err != nil {
		return fail(2, "connect", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, Schema); err != nil {
		return fail(2, "create projection tables", err)
	}
	if err := inbox.CreateTable(ctx, pool, ""); err != nil {
		return fail(2, "create inbox table", err)
	}
	if *retain > 0 {
		n, err := inbox.DeleteBefore(ctx, pool, "", time.Now().Add(-*retain))
		if err != nil {
			return fail(1, "retention", err)
		}
		log.Info("retention", "deleted_ids", n, "retain", *retain)
	}

	kopts := []kgo.Opt{kgo.SessionTimeout(*session)}
	var batchHandler inbox.BatchHandler
	if *batch {
		batchHandler = projectBatch
	}
	c, err := inbox.New(inbox.Config{
		Brokers:      strings.Split(*brokers, ","),
		Group:        *group,
		Topics:       strings.Split(*topics, ","),
		Pool:         pool,
		Handler:      project,
		BatchHandler: batchHandler,
		OnDuplicate:  countDuplicate,
		MaxAttempts:  *attempts,
		OnFailure:    policy,
		InstanceID:   *instance,
		KafkaOpts:    kopts,
		Logger:       log,
	}, nil)
	if err != nil {
		log.Error("inbox", "error", err)
		return 2
	}
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fail(1, "run", err)
	}
	return 0
}

// orderCreated is the demo's OrderCreated payload.
type orderCreated struct {
	OrderID  json.Number `json:"orderId"`
	Customer string      `json:"customer"`
	Total    json.Number `json:"total"`
}

// project applies one event to the projection, in tx.
func project(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
	typ := string(header(r, "eventType"))
	switch typ {
	case "OrderCreated":
		var p orderCreated
		dec := json.NewDecoder(bytes.NewReader(r.Value))
		dec.UseNumber()
		if err := dec.Decode(&p); err != nil || p.Customer == "" || p.Total == "" {
			return inbox.Permanent(fmt.Errorf("decode OrderCreated payload: %v (want {orderId, customer, total})", err))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO customer_totals (customer, orders, total) VALUES ($1, 1, $2::numeric)
			ON CONFLICT (customer) DO UPDATE SET orders = customer_totals.orders + 1, total = customer_totals.total + excluded.total`,
			p.Customer, p.Total.String()); err != nil {
			return fmt.Errorf("update customer_totals: %w", err)
		}
	case "CustomerLoyaltyReached":
		// The customer is the aggregate: the record key.
		if _, err := tx.Exec(ctx, `INSERT INTO customer_totals (customer, loyalty_events) VALUES ($1, 1)
			ON CONFLICT (customer) DO UPDATE SET loyalty_events = customer_totals.loyalty_events + 1`, string(r.Key)); err != nil {
			return fmt.Errorf("update customer_totals: %w", err)
		}
	}
	// Every event, known type or not, joins its aggregate's timeline.
	if _, err := tx.Exec(ctx, `INSERT INTO event_log (event_id, aggregateid, type) VALUES ($1, $2, $3)`,
		string(header(r, "id")), string(r.Key), typ); err != nil {
		return fmt.Errorf("insert into event_log: %w", err)
	}
	return nil
}

// projectBatch applies the events of one partition at hand, in order, in
// the one transaction inbox opened for them and their ids.
func projectBatch(ctx context.Context, tx pgx.Tx, rs []*kgo.Record) error {
	for _, r := range rs {
		if err := project(ctx, tx, r); err != nil {
			return fmt.Errorf("event %s: %w", header(r, "id"), err)
		}
	}
	return nil
}

// countDuplicate counts the records Kafka delivered again (their id was
// processed already), in the transaction inbox opened for them.
func countDuplicate(ctx context.Context, tx pgx.Tx, _ *kgo.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO consumer_stats VALUES ('duplicates_seen', 1)
		ON CONFLICT (name) DO UPDATE SET value = consumer_stats.value + 1`)
	return err
}

func header(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
