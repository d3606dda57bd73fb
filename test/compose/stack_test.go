package compose

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// wantOutbox is the outbox table of DESIGN.md: column, type, nullable.
const wantOutbox = "id uuid NO, aggregatetype text NO, aggregateid text NO, type text NO, payload jsonb YES"

const outboxColumnsSQL = `SELECT coalesce(string_agg(column_name || ' ' || data_type || ' ' || is_nullable, ', ' ORDER BY ordinal_position), '')
	FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'outbox'`

const outboxPrimaryKeySQL = `SELECT coalesce(string_agg(a.attname, ',' ORDER BY a.attnum), '')
	FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
	WHERE i.indrelid = 'public.outbox'::regclass AND i.indisprimary`

func outboxTable(t testing.TB, b *testbed.Bed, dsn string) (columns, pk string) {
	t.Helper()
	if err := b.QueryRow(t, dsn, outboxColumnsSQL).Scan(&columns); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(t, dsn, outboxPrimaryKeySQL).Scan(&pk); err != nil {
		t.Fatal(err)
	}
	return columns, pk
}

// TestInitSQLCreatesTheTestsOutbox runs deploy/compose/init.sql on a new
// database and compares its outbox table with DESIGN.md's and with the one the
// end-to-end tests create.
func TestInitSQLCreatesTheTestsOutbox(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	dsn := b.NewDatabase(t)
	b.Exec(t, dsn, readInitSQL(t))
	cols, pk := outboxTable(t, b, dsn)
	if cols != wantOutbox {
		t.Errorf("init.sql's outbox columns:\n  %s\nwant (DESIGN.md):\n  %s", cols, wantOutbox)
	}
	if pk != "id" {
		t.Errorf("init.sql's outbox primary key is (%s), want (id)", pk)
	}

	// The outbox the end-to-end and fault tests run walrelay against.
	e2e := b.NewDatabase(t)
	b.Exec(t, e2e, harness.OutboxDDL)
	e2eCols, e2ePK := outboxTable(t, b, e2e)
	if cols != e2eCols || pk != e2ePK {
		t.Errorf("init.sql's outbox differs from test/e2e's:\n  init.sql: %s (primary key %s)\n  test/e2e: %s (primary key %s)", cols, pk, e2eCols, e2ePK)
	}

	var ordersExists bool
	if err := b.QueryRow(t, dsn, `SELECT to_regclass('public.orders') IS NOT NULL`).Scan(&ordersExists); err != nil {
		t.Fatal(err)
	}
	if !ordersExists {
		t.Error("init.sql creates no orders table (docs/deploy.md's sample business table)")
	}

	pub := initSQLPublication(t)
	got := publication(t, b, dsn, pub)
	if want := "insert=true update=false delete=false truncate=false via_root=true tables=public.outbox"; got != want {
		t.Errorf("publication %s: %s, want %s", pub, got, want)
	}
	// The publication walrelay run --create makes, in the tests' database.
	b.Exec(t, e2e, pgcatalog.CreatePublicationSQL(pub, []string{"public.outbox"}))
	if created := publication(t, b, e2e, pub); got != created {
		t.Errorf("init.sql's publication %s differs from the one walrelay creates:\n  init.sql: %s\n  walrelay: %s", pub, got, created)
	}
}

// publication describes publication pub of database dsn: what it
// publishes, whether through the partition root, and its tables.
func publication(t testing.TB, b *testbed.Bed, dsn, pub string) string {
	t.Helper()
	var ins, upd, del, trunc, viaRoot bool
	var tables string
	err := b.QueryRow(t, dsn, `SELECT p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, p.pubviaroot,
		(SELECT coalesce(string_agg(schemaname || '.' || tablename, ','), '') FROM pg_publication_tables WHERE pubname = p.pubname)
		FROM pg_publication p WHERE p.pubname = $1`, pub).Scan(&ins, &upd, &del, &trunc, &viaRoot, &tables)
	if err != nil {
		t.Fatalf("publication %s: %v", pub, err)
	}
	return fmt.Sprintf("insert=%v update=%v delete=%v truncate=%v via_root=%v tables=%s", ins, upd, del, trunc, viaRoot, tables)
}

// placeOrderSQL is docs/deploy.md's sample write ("Run with Docker Compose"): a
// business row and its outbox row in one statement, so one transaction.
const placeOrderSQL = `WITH o AS (
  INSERT INTO orders (customer, total) VALUES ('alice', 42.50)
  RETURNING id, customer, total
)
INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
SELECT gen_random_uuid(), 'order', o.id::text, 'OrderCreated',
       jsonb_build_object('orderId', o.id, 'customer', o.customer, 'total', o.total)
FROM o;`

// TestDocsSampleWrite: the sample write TestComposeSetupStreams runs is the
// one docs/deploy.md shows.
func TestDocsSampleWrite(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), placeOrderSQL) {
		t.Errorf("docs/deploy.md (\"Run with Docker Compose\") does not show the sample write the test runs:\n%s", placeOrderSQL)
	}
}

// relayProc is a walrelay process started by a test.
type relayProc struct {
	cmd    *exec.Cmd
	addr   string // --http-addr
	out    *syncBuffer
	exited chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startRelay runs `walrelay run` with env as its only WALRELAY_* variables.
func startRelay(t *testing.T, name string, env map[string]string) *relayProc {
	t.Helper()
	p := &relayProc{addr: env["WALRELAY_HTTP_ADDR"], out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary(t), "run")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("walrelay %s output:\n%s", name, p.out.String())
		}
	})
	return p
}

func (p *relayProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and returns the exit code.
func (p *relayProc) stop(t *testing.T) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(45 * time.Second):
		t.Fatal("walrelay did not exit within 45s of SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

func httpStatus(addr, path string) int {
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls check until it returns nil, p exits or timeout passes.
func waitFor(t *testing.T, p *relayProc, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if !p.running() {
			t.Fatalf("walrelay exited (%v) while waiting for %s", p.err, what)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// statusIs returns a check that GET path on addr answers want.
func statusIs(addr, path string, want int) func() error {
	return func() error {
		if got := httpStatus(addr, path); got != want {
			return fmt.Errorf("GET %s: %d, want %d", path, got, want)
		}
		return nil
	}
}

// healthCommand returns docker-compose.yml's walrelay health check as a
// command against the test's binary and address.
func healthCommand(t *testing.T, addr string) func() error {
	t.Helper()
	hc := readCompose(t).Services["walrelay"].Healthcheck
	if hc == nil || len(hc.Test) < 3 || hc.Test[0] != "CMD" {
		t.Fatalf("walrelay health check %v is not [CMD, binary, sub-command, ...]", hc)
	}
	var args []string
	for _, a := range hc.Test[2:] {
		if u, err := url.Parse(a); err == nil && u.Scheme == "http" {
			u.Host = addr
			a = u.String()
		}
		args = append(args, a)
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, binary(t), args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("walrelay %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
}

// consumeKey reads topic until a record with key appears, and returns it.
func consumeKey(t *testing.T, b *testbed.Bed, topic, key string) *kgo.Record {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		recs := b.ConsumeAll(t, []string{topic}, time.Second)
		for _, r := range recs {
			if string(r.Key) == key {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record with key %q in %s within 60s (%d records)", key, topic, len(recs))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestComposeSetupStreams runs walrelay the way docker-compose.yml does (its
// WALRELAY_* environment, init.sql, docs/deploy.md's sample write), against the
// test bed instead of the compose services: the probes the compose file and
// the Kubernetes manifest use answer on the paths they use, the health check
// command passes, the record arrives, and a second instance on the same slot
// (the manifest's second replica) is alive but not ready until the first
// stops.
func TestComposeSetupStreams(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	dsn := b.NewDatabase(t)
	b.Exec(t, dsn, readInitSQL(t))

	suffix := make([]byte, 4)
	rand.Read(suffix)
	uniq := hex.EncodeToString(suffix)
	env := map[string]string{}
	for k, v := range readCompose(t).Services["walrelay"].Environment {
		if strings.HasPrefix(k, envPrefix) {
			env[k] = v
		}
	}
	// N.B. the bed's servers replace the compose services; the slot name is
	// unique because slots are per cluster and other packages share it.
	env["WALRELAY_PG_URL"] = dsn
	env["WALRELAY_BROKERS"] = strings.Join(b.Brokers(), ",")
	env["WALRELAY_SLOT"] = "compose_" + uniq
	env["WALRELAY_HTTP_ADDR"] = freeAddr(t)

	first := startRelay(t, "first", env)
	healthy := healthCommand(t, first.addr)
	waitFor(t, first, 60*time.Second, "the compose health check to pass", healthy)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code := httpStatus(first.addr, path); code != http.StatusOK {
			t.Errorf("GET %s on the streaming instance: %d, want 200", path, code)
		}
	}

	// docs/deploy.md's sample write, on a topic of this test's own.
	aggType := "order_" + uniq
	topic := "outbox.event." + aggType
	b.Exec(t, dsn, strings.Replace(placeOrderSQL, "'order'", "'"+aggType+"'", 1))
	r := consumeKey(t, b, topic, "1")
	var payload struct {
		OrderID  int     `json:"orderId"`
		Customer string  `json:"customer"`
		Total    float64 `json:"total"`
	}
	if err := json.Unmarshal(r.Value, &payload); err != nil || payload.OrderID != 1 || payload.Customer != "alice" || payload.Total != 42.5 {
		t.Errorf("record value %s (%v), want the order as JSON", r.Value, err)
	}
	if id, ok := header(r, "id"); !ok || len(id) != 36 {
		t.Errorf("record header id = %q, want the event's uuid", id)
	}
	if typ, _ := header(r, "eventType"); typ != "OrderCreated" {
		t.Errorf("record header eventType = %q, want OrderCreated (WALRELAY_HEADER_COLUMNS)", typ)
	}

	// The Kubernetes manifest's second replica.
	env2 := map[string]string{}
	for k, v := range env {
		env2[k] = v
	}
	env2["WALRELAY_HTTP_ADDR"] = freeAddr(t)
	second := startRelay(t, "second", env2)
	waitFor(t, second, 30*time.Second, "the standby to be alive (liveness)", statusIs(second.addr, "/healthz", http.StatusOK))
	for i := 0; i < 12; i++ {
		if code := httpStatus(second.addr, "/readyz"); code == http.StatusOK {
			t.Fatal("the standby's /readyz answered 200 while the first instance streams the slot")
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := healthCommand(t, second.addr)(); err == nil {
		t.Error("the compose health check passes on the standby, want it to fail (not ready)")
	}

	if code := first.stop(t); code != 0 {
		t.Errorf("the first instance exited %d on SIGTERM, want 0", code)
	}
	waitFor(t, second, 60*time.Second, "the standby to take over and become ready", statusIs(second.addr, "/readyz", http.StatusOK))
	b.Exec(t, dsn, strings.Replace(placeOrderSQL, "'order'", "'"+aggType+"'", 1))
	consumeKey(t, b, topic, "2")
	if code := second.stop(t); code != 0 {
		t.Errorf("the second instance exited %d on SIGTERM, want 0", code)
	}
}
