package pipeline

import (
	"testing"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/replication"
)

// TestTracingDatabase: the db-log-write span's db.namespace is the
// database walrelay streams from (the slot's), as --pg-url names it;
// without a database in the URL, PostgreSQL's default, the user's name.
func TestTracingDatabase(t *testing.T) {
	for url, want := range map[string]string{
		"postgres://relay@db.example:5432/shop?sslmode=disable": "shop",
		"host=db.example user=relay dbname=orders":              "orders",
		"postgres://relay@db.example:5432":                      "relay",
	} {
		t.Setenv("PGDATABASE", "")
		cfg := Config{Replication: replication.Config{ConnString: url}}
		if got := relayConfig(cfg, metrics.New()).Database; got != want {
			t.Errorf("--pg-url %q: db.namespace %q, want %q", url, got, want)
		}
	}
}
