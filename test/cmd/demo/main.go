package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/outbox"
	"github.com/walrelay/walrelay/test/testbed"
)

const schema = `
CREATE TABLE orders (
  id       bigserial PRIMARY KEY,
  customer text NOT NULL,
  total    numeric(10,2) NOT NULL
);` + outbox.TableDDL

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	pgURL, brokers := os.Getenv("WALRELAY_TEST_PG_URL"), os.Getenv("WALRELAY_TEST_KAFKA_BROKERS")
	if pgURL == "" || brokers == "" {
		return errors.New("WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS are not set: run `make demo`")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	step("creating database walrelay_demo with tables orders and outbox")
	dsn, err := testbed.FreshDatabase(ctx, pgURL, "walrelay_demo")
	if err != nil {
		return err
	}
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, schema); err != nil {
		return err
	}

	step("building and starting walrelay")
	bin := filepath.Join(os.TempDir(), "walrelay-demo")
	build := exec.Command("go", "build", "-o", bin, "./cmd/walrelay")
	// As it ships (make build, the image): static, without cgo.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build walrelay: %w", err)
	}
	relay := exec.Command(bin, "run",
		"--pg-url", dsn, "--brokers", brokers,
		"--slot", "walrelay_demo", "--publication", "walrelay_demo",
		"--header-columns", "type:eventType",
		"--status-interval", "1s", "--http-addr", "127.0.0.1:0",
		"--log-format", "console")
	relay.Stdout, relay.Stderr = os.Stderr, os.Stderr
	fmt.Println("  $", strings.Join(relay.Args, " "))
	if err := relay.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- relay.Wait() }()
	defer func() {
		if relay.ProcessState == nil {
			relay.Process.Kill()
		}
	}()
	if err := waitStreaming(ctx, db, exited); err != nil {
		return err
	}

	cl, err := testbed.NewReader(strings.Split(brokers, ","), false, kgo.ConsumeRegex(), kgo.ConsumeTopics(`^outbox\.event\.`))
	if err != nil {
		return err
	}
	defer cl.Close()

	step("writing 10 orders: each transaction inserts an order and its OrderCreated event; order 4's transaction rolls back")
	want := 0
	for i := 1; i <= 10; i++ {
		customer := fmt.Sprintf("customer-%d", i%3)
		rollback := i == 4
		events := 0
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO orders (customer, total) VALUES ($1, $2) RETURNING id`, customer, float64(i)*9.99).Scan(&id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO outbox VALUES (gen_random_uuid(), 'order', $1::bigint::text, 'OrderCreated',
				jsonb_build_object('orderId', $1::bigint, 'customer', $2::text, 'total', $3::numeric))`, id, customer, float64(i)*9.99); err != nil {
				return err
			}
			events++
			if i%5 == 0 { // a second event, for another aggregate type
				if _, err := tx.Exec(ctx, `INSERT INTO outbox VALUES (gen_random_uuid(), 'customer', $1, 'CustomerLoyaltyReached', jsonb_build_object('orders', 5))`, customer); err != nil {
					return err
				}
				events++
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		status := "committed"
		switch {
		case errors.Is(err, errRollback):
			status = "rolled back: its event must never appear"
		case err != nil:
			return err
		default:
			want += events
		}
		fmt.Printf("  order %2d for %s: %s\n", i, customer, status)
	}

	step(fmt.Sprintf("reading the records back with a Kafka consumer (%d expected)", want))
	got := 0
	deadline := time.Now().Add(time.Minute)
	for got < want && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() { // a transaction marker
				return
			}
			got++
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			fmt.Printf("  %s [partition %d, offset %d] key=%s headers={%s}\n      value=%s\n",
				r.Topic, r.Partition, r.Offset, r.Key, strings.Join(hs, ", "), r.Value)
		})
	}
	if got != want {
		return fmt.Errorf("read %d records, want %d", got, want)
	}

	step("stopping walrelay (SIGTERM): it waits for Kafka's acknowledgements and confirms the slot")
	relay.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("walrelay: %w", err)
		}
	case <-time.After(time.Minute):
		return errors.New("walrelay did not stop within a minute")
	}
	var lag int64
	if err := db.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = 'walrelay_demo'`).Scan(&lag); err != nil {
		return err
	}
	fmt.Printf("  walrelay exited 0; the slot is confirmed to within %d bytes of the current WAL position\n", lag)
	if _, err := db.Exec(ctx, `SELECT pg_drop_replication_slot('walrelay_demo')`); err != nil {
		return err
	}
	step(fmt.Sprintf("done: %d records, in commit order per aggregate, the rolled-back order absent", got))
	return nil
}

var errRollback = errors.New("rolled back on purpose")

func step(s string) { fmt.Printf("\n==> %s\n", s) }

// waitStreaming waits until walrelay holds the slot.
func waitStreaming(ctx context.Context, db *pgx.Conn, exited <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("walrelay exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		var active bool
		if err := db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = 'walrelay_demo'`).Scan(&active); err == nil && active {
			return nil
		}
	}
	return errors.New("walrelay did not start streaming within a minute")
}
