package fleet

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadyPipeline: /readyz/NAME answers for pipeline NAME alone: 503
// with why while it does not stream (here: it never started; one
// stopped on an error says so), 503 naming the group when another replica
// runs it or while this one joins the group, 404 for a name the file lacks.
func TestReadyPipeline(t *testing.T) {
	f := testFleet(t, `brokers: localhost:9092
defaults:
  publication: outbox_pub
  pg-require-verified-tls: false
pipelines:
  - name: orders
    pg-url: postgres://relay@db1.internal:5432/orders_db?sslmode=disable
    slot: orders_slot
  - name: billing
    pg-url: postgres://relay@db2.internal:5432/billing_db?sslmode=disable
    slot: billing_slot
`)
	stopped := "relay table public.outbox: does not exist"
	f.members[1].stopped.Store(&stopped)
	mux := http.NewServeMux()
	mux.HandleFunc(readyPipelinePath, f.serveReadyPipeline)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/readyz/orders", 503, "not ready: orders: not streaming: "},
		{"/readyz/billing", 503, "not ready: billing: stopped: relay table public.outbox: does not exist"},
		{"/readyz/nosuch", 404, `no pipeline "nosuch" in the pipeline file`},
	} {
		if code, body := get(tc.path); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	// In a group, a pipeline another replica runs.
	f.group = &groupRun{name: "outbox", instance: "r1"}
	f.group.joined.Store(true)
	for _, m := range f.members {
		m.grouped = true
	}
	if code, body := get("/readyz/orders"); code != 503 || !strings.Contains(body, "not ready: orders: runs on another replica of group outbox, not on r1") {
		t.Errorf("elsewhere: %d %q, want 503 naming the group", code, body)
	}
	f.group.joined.Store(false)
	if code, body := get("/readyz/orders"); code != 503 || !strings.Contains(body, "joining group outbox") {
		t.Errorf("joining: %d %q, want 503 joining the group", code, body)
	}
}
