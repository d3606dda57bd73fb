package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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

// schema is the workload's effect and duplicate tables.
const schema = `
CREATE TABLE IF NOT EXISTS inbox_bench_effects (grp text NOT NULL, id text NOT NULL, key text NOT NULL, seq bigint NOT NULL);
CREATE TABLE IF NOT EXISTS inbox_bench_duplicates (grp text PRIMARY KEY, n bigint NOT NULL);`

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("inboxbench", flag.ContinueOnError)
	pgURL := fs.String("pg-url", "", "PostgreSQL URL")
	brokers := fs.String("brokers", "localhost:9092", "Kafka brokers, comma-separated")
	group := fs.String("group", "", "consumer group")
	topics := fs.String("topics", "", "topics, comma-separated")
	delay := fs.Duration("delay", 0, "the Handler's own work: a wait after its insert")
	conns := fs.Int("pool", 8, "database connections")
	session := fs.Duration("session-timeout", 6*time.Second, "Kafka group session timeout")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *pgURL == "" || *group == "" || *topics == "" {
		fmt.Fprintln(os.Stderr, "inboxbench: --pg-url, --group and --topics are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pc, err := pgxpool.ParseConfig(*pgURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench: parse --pg-url:", err)
		return 2
	}
	pc.MaxConns = int32(*conns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench: connect:", err)
		return 2
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench: create tables:", err)
		return 2
	}
	if err := inbox.CreateTable(ctx, pool, ""); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		return 2
	}
	g := *group
	prof := startProfiler(ctx, pool)
	defer prof.finish(pool)
	c, err := inbox.New(inbox.Config{
		Brokers: strings.Split(*brokers, ","),
		Group:   g,
		Topics:  strings.Split(*topics, ","),
		Pool:    pool,
		Handler: func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			prof.handlerStart(r.Partition)
			if _, err := tx.Exec(ctx, `INSERT INTO inbox_bench_effects VALUES ($1, $2, $3, $4::bigint)`,
				g, header(r, "id"), string(r.Key), string(r.Value)); err != nil {
				return err
			}
			t := time.Now()
			time.Sleep(*delay)
			prof.handlerEnd(r.Partition, time.Since(t))
			return nil
		},
		OnDuplicate: func(ctx context.Context, tx pgx.Tx, _ *kgo.Record) error {
			_, err := tx.Exec(ctx, `INSERT INTO inbox_bench_duplicates VALUES ($1, 1) ON CONFLICT (grp) DO UPDATE SET n = inbox_bench_duplicates.n + 1`, g)
			return err
		},
		KafkaOpts: []kgo.Opt{kgo.SessionTimeout(*session)},
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		return 2
	}
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "inboxbench: run:", err)
		return 1
	}
	return 0
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
