package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// createAccounts is the docs' table statement, read from docs/inbox.md:
// the psql -c of its quick start.
var createAccounts = regexp.MustCompile(`psql "\$DATABASE_URL" -c '([^']+)'`)

// TestQuickstart builds this program and runs it as docs/inbox.md's quick
// start does (its table statement, DATABASE_URL and KAFKA_BROKERS) against
// the real PostgreSQL and Kafka: two OrderCreated events of one account
// (the first delivered twice), one of another and an OrderShipped add 2
// and 1 orders, each id processed once; the consumer logs JSON through
// log/slog (inbox.Config.Logger) and exits 0 on SIGTERM.
func TestQuickstart(t *testing.T) {
	b := testbed.Get(t)
	doc, err := os.ReadFile("../../../docs/inbox.md")
	if err != nil {
		t.Fatal(err)
	}
	m := createAccounts.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/inbox.md: no psql \"$DATABASE_URL\" -c '...' in the quick start")
	}
	dsn := b.NewDatabase(t)
	b.Exec(t, dsn, string(m[1]))
	run := harness.Uniq()
	a, c := "acct-a-"+run, "acct-c-"+run
	b.Exec(t, dsn, `INSERT INTO accounts (id) VALUES ($1), ($2)`, a, c)

	bin := filepath.Join(t.TempDir(), "quickstart")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers()...), kgo.DefaultProduceTopic("outbox.event.order"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// N.B. the docs' topic, created unless a run before created it.
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 3, 1, nil, "outbox.event.order"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	event := func(typ, key, id string) *kgo.Record {
		return &kgo.Record{Key: []byte(key), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "eventType", Value: []byte(typ)}}}
	}
	if err := cl.ProduceSync(context.Background(),
		event("OrderCreated", a, run+"-1"), event("OrderCreated", a, run+"-2"),
		event("OrderCreated", a, run+"-1"), // delivered again
		event("OrderShipped", a, run+"-3"), event("OrderCreated", c, run+"-4"),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	p := harness.StartProcess(t, bin, []string{"DATABASE_URL=" + dsn, "KAFKA_BROKERS=" + strings.Join(b.Brokers(), ",")}, nil)
	check := harness.Connect(t, dsn)
	defer check.Close(context.Background())
	// N.B. all four ids processed: the repeat, before -3 in a's
	// partition, was handled too.
	harness.WaitFor(t, 2*time.Minute, "the four ids processed", func() bool {
		if p.Exited() {
			t.Fatalf("the consumer exited: %v\n%s", p.Err(), p.Log())
		}
		var n int
		err := check.QueryRow(context.Background(), `SELECT count(*) FROM inbox_processed WHERE id LIKE $1`, run+"-%").Scan(&n)
		return err == nil && n == 4
	})
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("the consumer exited %d after SIGTERM, want 0", code)
	}
	for _, want := range []struct {
		id     string
		orders int64
	}{{a, 2}, {c, 1}} {
		var n int64
		if err := check.QueryRow(context.Background(), `SELECT orders FROM accounts WHERE id = $1`, want.id).Scan(&n); err != nil || n != want.orders {
			t.Errorf("account %s: %d orders (%v), want %d", want.id, n, err, want.orders)
		}
	}
	if log := p.Log(); !strings.Contains(log, `"msg":"partitions assigned"`) || !strings.Contains(log, `"logger":"inbox"`) {
		t.Errorf("the consumer's log has no JSON line partitions assigned of logger inbox:\n%s", log)
	}
}
