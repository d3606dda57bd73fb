package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	err := run(ctx, log, os.Getenv("DATABASE_URL"), strings.Split(os.Getenv("KAFKA_BROKERS"), ","))
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("inbox consumer", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, dsn string, brokers []string) error {
	pool, err := pgxpool.New(ctx, dsn) // pool_max_conns: one per partition
	if err != nil {
		return err
	}
	defer pool.Close()
	// Or run inbox.DDL("") in a migration.
	if err := inbox.CreateTable(ctx, pool, ""); err != nil {
		return err
	}
	c, err := inbox.New(inbox.Config{
		Brokers: brokers,
		Group:   "billing",
		Topics:  []string{"outbox.event.order"},
		Pool:    pool,
		Handler: func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			if inbox.Header(r, "eventType") != "OrderCreated" {
				return nil // marked processed without an effect
			}
			_, err := tx.Exec(ctx, `UPDATE accounts SET orders = orders + 1 WHERE id = $1`, string(r.Key))
			return err // an error rolls the transaction back; the record is tried again
		},
		Logger: log, // a *slog.Logger, inbox.ZapLogger(z), or nil
	}, nil)
	if err != nil {
		return err
	}
	// Until ctx ends; then it commits what it finished and closes the client.
	return c.Run(ctx)
}
