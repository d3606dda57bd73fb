package fleet

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pipeline"
)

// testFleet is the fleet Main would build from file, not running.
func testFleet(t *testing.T, file string) *fleet {
	t.Helper()
	top, _ := testPipeline()
	plans, ms := load([]byte(file), top, testPipeline)
	if len(ms) > 0 {
		t.Fatalf("load: %s", format("f.yaml", ms))
	}
	f := &fleet{log: zap.NewNop()}
	for _, p := range plans {
		m := metrics.New()
		p.cfg.Metrics = m
		mem := &member{name: p.name, slot: p.cfg.Replication.Slot, db: databaseName(p.cfg.Replication.ConnString), metrics: m}
		var err error
		if mem.relay, err = pipeline.New(p.cfg, zap.NewNop()); err != nil {
			t.Fatalf("pipeline %s: %v", p.name, err)
		}
		f.members = append(f.members, mem)
	}
	return f
}

// TestStatusPage: / has a row per pipeline in the file's order, with its
// database's name and slot; a name and an error holding markup show as
// text (escaped), never as elements; no connection string or password.
func TestStatusPage(t *testing.T) {
	f := testFleet(t, `brokers: localhost:9092
defaults:
  publication: outbox_pub
  pg-require-verified-tls: false
pipelines:
  - name: orders
    pg-url: postgres://relay:s3cret@db1.internal:5432/orders_db?sslmode=disable
    slot: orders_slot
  - name: "<b>x</b>"
    pg-url: postgres://relay:s3cret@db2.internal:5432/billing_db?sslmode=disable
    slot: billing_slot
`)
	stopped := `relay table "<script>alert(1)</script>": does not exist`
	f.members[1].stopped.Store(&stopped)
	f.members[1].metrics.Parked(2, 5, time.Now())
	rec := httptest.NewRecorder()
	f.servePage(rec, httptest.NewRequest("GET", "/", nil))
	body, _ := io.ReadAll(rec.Body)
	page := string(body)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if got := strings.Count(page, `<tr class="row"`); got != 2 {
		t.Errorf("%d rows, want 2 (one per pipeline):\n%s", got, page)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="5">`,
		`data-pipeline="orders" data-state="starting"`,
		`<td class="name">&lt;b&gt;x&lt;/b&gt;</td>`,
		`<span class="state stopped">stopped</span>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`,
		`orders_db · orders_slot`, `billing_db · billing_slot`,
		`<td class="num">2</td>`, // billing's parked aggregates
		`0 of 2 pipelines ready`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s:\n%s", want, page)
		}
	}
	if strings.Index(page, `data-pipeline="orders"`) > strings.Index(page, `data-pipeline="&lt;b&gt;x&lt;/b&gt;"`) {
		t.Errorf("rows not in the file's order:\n%s", page)
	}
	for _, never := range []string{"<b>", "<script", "s3cret", "postgres://", "db1.internal", "@db"} {
		if strings.Contains(page, never) {
			t.Errorf("the page holds %q:\n%s", never, page)
		}
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q, want default-src 'none'", csp)
	}
}

// TestHistory: one point per historyEvery (the rate since the last), the
// samples between ignored, at most historyLen kept, the newest last.
func TestHistory(t *testing.T) {
	var h history
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	h.add(t0, 100)
	h.add(t0.Add(5*time.Second), 150) // between points: ignored
	h.add(t0.Add(10*time.Second), 200)
	h.add(t0.Add(20*time.Second), 200)
	if got := h.rates(); len(got) != 2 || got[0] != 10 || got[1] != 0 {
		t.Fatalf("rates %v, want [10 0]", got)
	}
	for i := range 100 {
		h.add(t0.Add(time.Duration(30+10*i)*time.Second), 200+float64(10*(i+1)))
	}
	got := h.rates()
	if len(got) != historyLen || got[len(got)-1] != 1 {
		t.Fatalf("%d rates ending %v, want %d ending 1", len(got), got[len(got)-1], historyLen)
	}
	c := newChart([]float64{0, 5, 10})
	if c.Points != "122.7,28.0 136.4,15.0 150.0,2.0" || c.Area != "122.7,28 "+c.Points+" 150,28" || c.Peak != "10" || c.Minutes != 2 {
		t.Errorf("chart %+v, want 3 points at the right edge of 2 minutes, the peak at the top", c)
	}
	if c := newChart(got); !strings.HasPrefix(c.Points, "0.0,") || c.Minutes != 10 {
		t.Errorf("chart of %d points %+v, want 10 minutes from the left edge", len(got), c)
	}
}
