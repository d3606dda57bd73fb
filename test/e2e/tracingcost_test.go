package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestTracingCost drains one
// backlog of outbox rows, each with a trace context, through four walrelay
// processes in turn, one slot and topic each, and logs FIGURES: the drain
// time and walrelay's CPU time with the context column off, with the
// headers copied but no span export, exporting spans to a real Collector
// with every writer sampled, and with one writer in ten sampled
// (parent-based sampling follows the writer). Figures only: no threshold.
// make test drains 1,000 events (a check that each configuration relays
// everything); WALRELAY_TRACING_COST_EVENTS=50000 for the figures.
func TestTracingCost(t *testing.T) {
	t.Parallel()
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("WALRELAY_TRACING_COST_EVENTS")); err == nil && v > 0 {
		n = v
	}
	col := testbed.StartCollector(t)
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN ctx_all text, ADD COLUMN ctx_10 text`)
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.HTTP, "OTEL_SERVICE_NAME=walrelay-cost"}
	configs := []struct {
		name   string
		env    []string
		column string
	}{
		{"column-off", nil, "-"},
		{"headers-only", nil, "ctx_all"},
		{"export-100pct", otel, "ctx_all"},
		{"export-10pct", otel, "ctx_10"},
	}
	args := func(name, column string) []string {
		return []string{"--slot", e.Slot + "_" + strings.ReplaceAll(name, "-", "_"), "--trace-context-column", column,
			"--topic", "tc" + e.Prefix + "." + name + ".${aggregatetype}"}
	}
	// The slots first (walrelay creates its slot at its first start),
	// then the backlog they all read.
	for _, c := range configs {
		p := e.StartEnv(t, c.env, args(c.name, c.column)...)
		// N.B. not WaitStreaming: that watches the Env's own slot.
		harness.WaitFor(t, time.Minute, c.name+" streaming", func() bool { return strings.Contains(p.Log(), `"msg":"streaming"`) })
		if code := p.Stop(30 * time.Second); code != 0 {
			t.Fatalf("%s: walrelay exit %d", c.name, code)
		}
	}
	agg := e.AggType(0)
	for i := 0; i < n; i += 1000 {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, ctx_all, ctx_10)
			SELECT gen_random_uuid(), $1, 'k-' || (g % 100), 'OrderCreated', jsonb_build_object('n', g, 'pad', repeat('x', 200)),
				format(E'#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-%s-%s-01\n', md5(g::text), substr(md5('s' || g), 1, 16)),
				format(E'#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-%s-%s-%s\n', md5(g::text), substr(md5('s' || g), 1, 16), CASE WHEN g % 10 = 0 THEN '01' ELSE '00' END)
			FROM generate_series($2::int, $3::int) g`, agg, i, min(i+1000, n)-1)
	}
	var lines []string
	for _, c := range configs {
		coll := e.CollectRE(t, "^"+regexp.QuoteMeta("tc"+e.Prefix+"."+c.name+"."))
		start := time.Now()
		p := e.StartEnv(t, c.env, args(c.name, c.column)...)
		coll.WaitFor(n, 10*time.Minute)
		drain := time.Since(start)
		cpu := cpuSeconds(t, p.Pid())
		if code := p.Stop(30 * time.Second); code != 0 {
			t.Fatalf("%s: walrelay exit %d", c.name, code)
		}
		lines = append(lines, fmt.Sprintf("%-14s drain %6.2fs  %7.0f events/s  walrelay CPU %6.2fs (%5.1f µs/event)",
			c.name, drain.Seconds(), float64(n)/drain.Seconds(), cpu, cpu*1e6/float64(n)))
	}
	t.Logf("FIGURES tracing cost, %d events (start to the last record read, walrelay's CPU from /proc):\n%s", n, strings.Join(lines, "\n"))
}

// cpuSeconds is the user and system CPU time of process pid so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks: USER_HZ is 100 on Linux
}
