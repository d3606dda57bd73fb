package kafkaside

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

const (
	alertsFile    = "../../../deploy/prometheus/walrelay-alerts.yml"
	dashboardFile = "../../../deploy/grafana/walrelay-dashboard.json"
)

// alertExprs reads the alerting rules and returns each rule's expression
// by alert name, failing on a rule without name, expression, severity or
// summary.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: rule %q in group %s needs alert, expr, labels.severity and annotations.summary", alertsFile, r.Alert, g.Name)
				continue
			}
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// dashboardExprs returns every query of the dashboard: the panels'
// targets and the template variables' queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(c, k)
			}
		case []any:
			for _, c := range v {
				walk(c, key)
			}
		case string:
			if key == "expr" || key == "definition" {
				out = append(out, v)
			}
		}
	}
	walk(d, "")
	return out
}

var (
	// The metric families walrelay's registry has: its own, the Go and
	// the process collectors'.
	metricNameRE = regexp.MustCompile(`\b(?:walrelay|process|go)_[a-zA-Z0-9_]+`)
	// A selector with label matchers: name{...}.
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	sampleRE   = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s`)
	labelRE    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"`)
)

// TestDeployQueriesUseExportedMetrics: every metric the shipped alerting
// rules and Grafana dashboard query is one a running walrelay exports, as
// scraped from its /metrics after it relayed an event, and every label
// value they select on (other than job and instance) is one it exports
// for that metric. The truth is the scrape, not a list kept beside it.
func TestDeployQueriesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	rules := alertExprs(t)
	panels := dashboardExprs(t)
	for _, want := range []string{"WalrelayDown", "WalrelayNotReady", "WalrelaySlotLagHigh", "WalrelayOldestUnackedOld", "WalrelayDeadLetters",
		"WalrelayProduceFailures", "WalrelaySlotWALNotReserved", "WalrelaySlotAtRisk", "WalrelaySafeWALSizeFalling"} {
		if rules[want] == "" {
			t.Errorf("%s has no alert %s", alertsFile, want)
		}
	}
	if len(panels) < 10 {
		t.Errorf("%s has %d queries, want a dashboard", dashboardFile, len(panels))
	}
	var exprs []string
	for _, e := range rules {
		exprs = append(exprs, e)
	}
	exprs = append(exprs, panels...)

	e := newEnv(t)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)
	// The slot's gauges are polled: wait until they are there.
	var scrape string
	harness.WaitFor(t, time.Minute, "walrelay to export the slot's wal_status and a published event", func() bool {
		resp, err := http.Get("http://" + relay.HTTPAddr() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		scrape = string(b)
		return strings.Contains(scrape, `walrelay_slot_wal_status{status="reserved"} 1`) && strings.Contains(scrape, "walrelay_events_published_total{")
	})
	exported := map[string]map[string]map[string]bool{} // metric → label → values
	for _, line := range strings.Split(scrape, "\n") {
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := exported[m[1]]
		if labels == nil {
			labels = map[string]map[string]bool{}
			exported[m[1]] = labels
		}
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			if labels[l[1]] == nil {
				labels[l[1]] = map[string]bool{}
			}
			labels[l[1]][l[2]] = true
		}
	}
	named := 0
	for _, expr := range exprs {
		for _, name := range metricNameRE.FindAllString(expr, -1) {
			named++
			if exported[name] == nil {
				t.Errorf("query %q names %s, which walrelay does not export", expr, name)
			}
		}
		for _, sel := range selectorRE.FindAllStringSubmatch(expr, -1) {
			name := sel[1]
			if exported[name] == nil {
				t.Errorf("query %q selects %s, which walrelay does not export", expr, name)
				continue
			}
			for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				label, op, value := m[1], m[2], m[3]
				if label == "job" || label == "instance" || strings.Contains(value, "$") {
					continue
				}
				values := []string{value}
				if op == "=~" || op == "!~" {
					values = strings.Split(value, "|")
				}
				for _, v := range values {
					if !exported[name][label][v] {
						t.Errorf("query %q selects %s{%s=%q}: walrelay exports %s with %s values %v", expr, name, label, v, name, label, e2etest.Keys(exported[name][label]))
					}
				}
			}
		}
	}
	if named < len(exprs) {
		t.Errorf("%d metric names in %d queries: some query names none", named, len(exprs))
	}
	t.Logf("%d alert rules and %d dashboard queries name %d metrics", len(rules), len(panels), named)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
