package inbox_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/inbox"
)

// run is the consumer of docs/inbox.md, quoted there verbatim
// (TestDocQuotesRun): it compiles here against the package's API.
func run(ctx context.Context, dsn string, log *zap.Logger) error {
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
		Brokers: []string{"kafka:9092"},
		Group:   "billing",
		Topics:  []string{"outbox.event.order"},
		Pool:    pool,
		Handler: func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			_, err := tx.Exec(ctx, `UPDATE accounts SET orders = orders + 1 WHERE id = $1`, string(r.Key))
			return err // an error rolls the transaction back; the record is tried again
		},
	}, log) // a *zap.Logger (inbox.SlogLogger for log/slog), or nil
	if err != nil {
		return err
	}
	// Until ctx ends; then it commits what it finished and closes the client.
	return c.Run(ctx)
}

// Example is the consumer a newcomer writes (docs/inbox.md).
func Example() {
	_ = run // run(ctx, "postgres://...", nil)
}

// TestDocQuotesRun: the first Go block of docs/inbox.md is run above,
// verbatim.
func TestDocQuotesRun(t *testing.T) {
	doc, err := os.ReadFile("../docs/inbox.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```go\n")
	block, _, ok2 := strings.Cut(block, "```")
	start := strings.Index(string(src), "func run(")
	end := strings.Index(string(src), "\n}\n")
	if !ok || !ok2 || start < 0 || end < start {
		t.Fatal("no Go block in docs/inbox.md, or no func run here")
	}
	if want := string(src[start : end+3]); block != want {
		t.Errorf("docs/inbox.md's first Go block:\n%s\nwant func run of example_test.go verbatim:\n%s", block, want)
	}
}
