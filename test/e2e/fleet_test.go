package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// fleetFile is the pipeline file of the fleet tests (docs/fleet.md quotes
// it): $BROKERS, $UNIQ and each pipeline's $URL_FILE_<name> are filled in
// by the test.
const fleetFile = `# process-wide: the HTTP endpoints, the log, Kafka's brokers and security
brokers: $BROKERS
http-addr: 127.0.0.1:0
log-level: info

# every pipeline's, unless it sets its own
defaults:
  publication: outbox_pub
  table: public.outbox
  header-columns: type:eventType
  topic-partitions: 3
  status-interval: 1s
  on-poison: dead-letter

pipelines:
  - name: orders
    pg-url-file: $URL_FILE_orders
    slot: orders_$UNIQ
  - name: billing
    pg-url-file: $URL_FILE_billing
    slot: billing_$UNIQ
  - name: shipping
    pg-url-file: $URL_FILE_shipping
    slot: shipping_$UNIQ
    kafka-linger: 10ms
`

// fleetPipelines are the pipelines of fleetFile, in its order.
var fleetPipelines = []string{"orders", "billing", "shipping"}

// fleetEnv is one pipeline of a fleet test: its database, slot and topics.
type fleetEnv struct {
	*e2etest.Env
	name string
	c    *e2etest.Collector
}

// startFleet creates a database for each pipeline of fleetFile, writes the
// file and starts `walrelay run --config` on it; it returns once every
// pipeline streams.
func startFleet(t *testing.T) (*e2etest.Proc, []*fleetEnv) {
	t.Helper()
	p, envs := startFleetWith(t, func(s string) string { return s })
	for _, e := range envs {
		waitStreaming(t, p, e)
	}
	return p, envs
}

// waitStreaming waits until e's pipeline streams its slot.
func waitStreaming(t *testing.T, p *e2etest.Proc, e *fleetEnv) {
	t.Helper()
	harness.WaitFor(t, time.Minute, "pipeline "+e.name+" to stream its slot", func() bool {
		if p.Exited() {
			t.Fatalf("walrelay exited before streaming")
		}
		return e.Walsender(t) != 0
	})
}

// startFleetWith is startFleet with the file edited by edit, without
// waiting.
func startFleetWith(t *testing.T, edit func(string) string) (*e2etest.Proc, []*fleetEnv) {
	t.Helper()
	dir := t.TempDir()
	uniq := harness.Uniq()
	vars := map[string]string{"UNIQ": uniq}
	var envs []*fleetEnv
	for _, name := range fleetPipelines {
		e := newEnv(t)
		e.Slot, e.Pub = name+"_"+uniq, "outbox_pub"
		vars["URL_FILE_"+name] = e2etest.WriteFile(t, dir, name+".url", []byte(e.DSN))
		envs = append(envs, &fleetEnv{Env: e, name: name, c: e.Collect(t)})
	}
	vars["BROKERS"] = strings.Join(envs[0].Bed.Brokers(), ",")
	file := e2etest.WriteFile(t, dir, "fleet.yaml", []byte(edit(os.Expand(fleetFile, func(k string) string { return vars[k] }))))
	p := &e2etest.Proc{Relay: harness.StartProcess(t, e2etest.Bin, nil, []string{"run", "--config", file}), T: t, Env: envs[0].Env}
	return p, envs
}

// missingTable makes pipelines of fleetFile relay a table that does not
// exist: a setup a person must fix, which stops the pipeline.
func missingTable(names ...string) func(string) string {
	return func(s string) string {
		for _, n := range names {
			s = strings.Replace(s, "    slot: "+n+"_", "    table: public.no_such_outbox\n    slot: "+n+"_", 1)
		}
		return s
	}
}

// pipelines GETs /pipelines.
func pipelines(t *testing.T, p *e2etest.Proc) map[string]map[string]any {
	t.Helper()
	code, body := p.Get("/pipelines")
	if code != 200 {
		t.Fatalf("/pipelines: %d %s", code, body)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("/pipelines: %v: %s", err, body)
	}
	out := map[string]map[string]any{}
	var names []string
	for _, s := range list {
		name, _ := s["name"].(string)
		names = append(names, name)
		out[name] = s
	}
	if !slices.Equal(names, fleetPipelines) {
		t.Fatalf("/pipelines lists %v, want %v in the file's order:\n%s", names, fleetPipelines, body)
	}
	return out
}

// labelled sums the samples of metric name with pipeline="NAME" in
// walrelay's /metrics, and fails when a walrelay series other than
// walrelay_build_info has no pipeline label.
func labelled(t *testing.T, p *e2etest.Proc, metric, pipeline string) float64 {
	t.Helper()
	_, body := p.Get("/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "walrelay_") {
			continue
		}
		if !strings.Contains(line, `pipeline="`) && !strings.HasPrefix(line, "walrelay_build_info") {
			t.Fatalf("series without a pipeline label: %s", line)
		}
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, metric+"{") && strings.Contains(line[:i], `pipeline="`+pipeline+`"`) {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// workload is n events of writers on e's database, prepared.
func workload(t *testing.T, e *fleetEnv, n int) *harness.Workload {
	t.Helper()
	w := &harness.Workload{Writers: 2, Events: n, Aggregates: 20, MaxTxRows: 5, Rollback: 0.1}
	w.Prepare(t, e.Env.Env)
	return w
}

// write writes n events on each of envs at once and returns the ids
// rolled back.
func write(t *testing.T, n int, envs ...*fleetEnv) map[string]bool {
	t.Helper()
	errs := make(chan error, len(envs))
	var ws []*harness.Workload
	for _, e := range envs {
		w := workload(t, e, n)
		ws = append(ws, w)
		go func() {
			if err := w.Run(context.Background(), e.Env.Env); err != nil {
				errs <- fmt.Errorf("writers on %s: %w", e.name, err)
				return
			}
			errs <- nil
		}()
	}
	for range envs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rolledBack := map[string]bool{}
	for _, w := range ws {
		for id := range w.RolledBack() {
			rolledBack[id] = true
		}
	}
	return rolledBack
}

// readBack waits until e's slot has confirmed past everything written so
// far, reads e's topics to their end offsets and checks them against the
// outbox table: each row, in commit order per aggregate, nothing else.
func readBack(t *testing.T, e *fleetEnv, rolledBack map[string]bool, dupsAllowed bool) (int, e2etest.Verdict) {
	t.Helper()
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("pipeline %s's slot to confirm past %s", e.name, end), func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
	rows := e.CommittedRows(t)
	// N.B. the consumer first sees as many records as rows were committed:
	// a make test found ToEnd's listing of end offsets empty for two of
	// three pipelines whose 303 and 304 events Kafka had acknowledged
	// (records=0, lost=303), a reader's miss, not a relay's.
	e.c.WaitFor(len(rows), 2*time.Minute)
	return len(rows), e2etest.CheckRecords(t, e.Env, e.c.ToEnd(), rows, rolledBack, 3, dupsAllowed)
}

// TestFleetRelaysEveryPipeline: three pipelines on three databases in one
// process, writers on all at once: every pipeline's events read back to
// the end offsets, each row once, in commit order per aggregate; /readyz
// ready, /pipelines and the pipeline-labelled metrics agree with what was
// read; SIGTERM stops all, exit 0.
func TestFleetRelaysEveryPipeline(t *testing.T) {
	t.Parallel()
	p, envs := startFleet(t)
	rolledBack := write(t, 300, envs...)
	read := map[string]int{}
	for _, e := range envs {
		n, _ := readBack(t, e, rolledBack, false)
		read[e.name] = n
	}
	harness.WaitFor(t, time.Minute, "/readyz to answer 200", func() bool { return p.Ready() == 200 })
	st := pipelines(t, p)
	_, body := p.Get("/pipelines")
	t.Logf("/pipelines:\n%s", body)
	for _, e := range envs {
		s := st[e.name]
		if s["state"] != "streaming" || s["ready"] != true || s["slot"] != e.Slot || s["last_error"] != "" {
			t.Errorf("/pipelines %s: %v, want streaming, ready, slot %s, no error", e.name, s, e.Slot)
		}
		if got := s["events_published"]; got != float64(read[e.name]) {
			t.Errorf("/pipelines %s: events_published %v, want %d (the rows read back)", e.name, got, read[e.name])
		}
		if got := labelled(t, p, "walrelay_events_published_total", e.name); got != float64(read[e.name]) {
			t.Errorf(`walrelay_events_published_total{pipeline=%q} = %v, want %d`, e.name, got, read[e.name])
		}
		if got := labelled(t, p, "walrelay_ready", e.name); got != 1 {
			t.Errorf(`walrelay_ready{pipeline=%q} = %v, want 1`, e.name, got)
		}
		t.Logf("FIGURES pipeline=%s events=%d events_per_s=%v slot_lag_bytes=%v", e.name, read[e.name], s["events_per_second"], s["slot_lag_bytes"])
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("FIGURES pipelines=%d peak_rss_mb=%.1f", len(envs), p.PeakRSSMB())
}

// TestFleetPipelineDownOthersGoOn: one pipeline's database refuses every
// connection (ALLOW_CONNECTIONS false, its backends terminated): the other
// pipelines keep relaying (their new events read back), /readyz is not
// ready and names it, /pipelines says why; once the database takes
// connections again it resumes, nothing lost.
func TestFleetPipelineDownOthersGoOn(t *testing.T) {
	t.Parallel()
	p, envs := startFleet(t)
	down := envs[1]
	write(t, 100, envs...)
	db := pgx.Identifier{down.Database(t)}.Sanitize()
	admin := envs[0].DSN
	down.Bed.Exec(t, admin, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS false")
	allowed := false
	t.Cleanup(func() {
		if !allowed {
			down.Bed.Exec(t, admin, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS true")
		}
	})
	down.Bed.Exec(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", down.Database(t))
	var why string
	harness.WaitFor(t, time.Minute, "/readyz to name pipeline billing", func() bool {
		code, body := p.Get("/readyz")
		why = body
		return code == 503 && strings.Contains(body, "billing: ")
	})
	for _, name := range []string{"orders", "shipping"} {
		if strings.Contains(why, name+": ") {
			t.Errorf("/readyz names %s, which streams:\n%s", name, why)
		}
	}

	// The others go on: new events on their databases, read back.
	rolledBack := write(t, 200, envs[0], envs[2])
	for _, e := range []*fleetEnv{envs[0], envs[2]} {
		// N.B. no fault struck them: each event exactly once.
		readBack(t, e, rolledBack, false)
	}
	if s := down.Bed.Slot(t, admin, down.Slot); s.Active {
		t.Fatalf("billing's slot is active while its database refuses connections: the fault did not hold")
	}
	st := pipelines(t, p)
	if s := st["billing"]; s["ready"] != false || s["state"] == "streaming" || s["last_error"] == "" {
		t.Errorf("/pipelines billing while its database is down: %v, want not ready, not streaming, its last error", s)
	}
	if got := labelled(t, p, "walrelay_ready", "billing"); got != 0 {
		t.Errorf(`walrelay_ready{pipeline="billing"} = %v while down, want 0`, got)
	}
	t.Logf("billing while down: state=%v last_error=%v", st["billing"]["state"], st["billing"]["last_error"])

	down.Bed.Exec(t, admin, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS true")
	allowed = true
	rolledBack = write(t, 100, down)
	harness.WaitFor(t, 2*time.Minute, "/readyz to answer 200 once billing's database is back", func() bool { return p.Ready() == 200 })
	if n, v := readBack(t, down, rolledBack, true); v.Lost != 0 {
		t.Errorf("billing lost %d of %d events", v.Lost, n)
	}
	if p.Exited() {
		t.Fatalf("walrelay exited")
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestFleetPermanentErrorStopsOnePipeline: a pipeline whose setup is
// wrong (its table does not exist) stops, alone: logged with its name,
// /readyz names it, /pipelines says stopped and why,
// walrelay_pipeline_stopped is 1 for it; the others relay; SIGTERM exits
// 0. When every pipeline stops so, walrelay exits with the worst code: 2.
func TestFleetPermanentErrorStopsOnePipeline(t *testing.T) {
	t.Parallel()
	p, envs := startFleetWith(t, missingTable("billing"))
	harness.WaitFor(t, time.Minute, "pipeline billing to stop", func() bool {
		if p.Exited() {
			t.Fatalf("walrelay exited when one pipeline stopped")
		}
		return strings.Contains(p.Log(), `"pipeline":"billing"`) && strings.Contains(p.Log(), "pipeline stopped: fix the setup and restart walrelay")
	})
	for _, e := range []*fleetEnv{envs[0], envs[2]} {
		waitStreaming(t, p, e)
	}
	rolledBack := write(t, 100, envs[0], envs[2])
	for _, e := range []*fleetEnv{envs[0], envs[2]} {
		readBack(t, e, rolledBack, false)
	}
	code, body := p.Get("/readyz")
	if code != 503 || !strings.Contains(body, "billing: stopped: ") || !strings.Contains(body, "no_such_outbox") || strings.Contains(body, "orders: ") {
		t.Errorf("/readyz: %d %s, want 503 naming billing alone, with its error", code, body)
	}
	if s := pipelines(t, p)["billing"]; s["state"] != "stopped" || !strings.Contains(fmt.Sprint(s["last_error"]), "no_such_outbox") {
		t.Errorf("/pipelines billing: %v, want stopped with its error", s)
	}
	for name, want := range map[string]float64{"orders": 0, "billing": 1, "shipping": 0} {
		if got := labelled(t, p, "walrelay_pipeline_stopped", name); got != want {
			t.Errorf(`walrelay_pipeline_stopped{pipeline=%q} = %v, want %v`, name, got, want)
		}
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}

	all, _ := startFleetWith(t, missingTable(fleetPipelines...))
	if code := all.Wait(time.Minute); code != 2 {
		t.Errorf("exit code %d when every pipeline stopped on its setup, want 2", code)
	}
	if got := strings.Count(all.Log(), "pipeline stopped: fix the setup"); got != 3 || !strings.Contains(all.Log(), "every pipeline has stopped") {
		t.Errorf("log: %d pipelines stopped, want 3, then every pipeline has stopped:\n%s", got, all.Log())
	}
}

// TestFleetFileMistakes: a file with mistakes runs nothing: exit 2, every
// mistake at once, each with its line and pipeline.
func TestFleetFileMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	many := `brokers: localhost:9092
log-level: loud
slot: oops
defaults:
  status-interval: 30
  brokers: k:1
pipelines:
  - name: orders
    pg-url: postgres://localhost/orders
    slot: same
    on-poison: ignore
  - name: billing
    pg-url: postgres://localhost/orders
    slot: same
    publicaton: billing
  - name: orders
    pg-url: postgres://localhost/shipping
  - pg-url: postgres://localhost/other
`
	const one = "pipelines:\n  - name: orders\n    pg-url: postgres://localhost/orders\n"
	for _, tc := range []struct {
		name, file string
		args, env  []string
		want       []string
	}{
		{name: "everywhere", file: many, want: []string{
			`:2: --log-level "loud": want debug, info, warn or error`,
			`:3: slot: is a pipeline's setting: put it under defaults: (every pipeline) or under a pipeline`,
			`:5: status-interval: "30": want a duration with a unit`,
			`:6: brokers: is process-wide (every pipeline shares it): set it at the top of the file`,
			`:11: pipeline "orders": on-poison "ignore": want dead-letter, park or halt`,
			`:14: pipeline "billing": slot "same" of database "orders" on localhost:5432 is also pipeline "orders"'s (line 8)`,
			`:15: pipeline "billing": publicaton: no such setting: did you mean publication?`,
			`:16: pipeline "orders": name: "orders" is also the name of the pipeline at line 8`,
			`:18: pipelines: item 4 has no name`,
		}},
		{name: "a pipeline's flag on the command line", file: one, args: []string{"--slot", "x"},
			want: []string{`--slot is given with --config (on the command line or as WALRELAY_SLOT): set slot: under defaults: or under a pipeline in the file instead`}},
		{name: "a pipeline's variable", file: one, env: []string{"WALRELAY_PUBLICATION=p"},
			want: []string{`--publication is given with --config (on the command line or as WALRELAY_PUBLICATION)`}},
		{name: "no pipelines", file: "brokers: localhost:9092\n", want: []string{`:1: no pipelines: list at least one under pipelines:`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := e2etest.WriteFile(t, dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml", []byte(tc.file))
			code, out := e2etest.RunOnce(t, tc.env, append([]string{"run", "--config", path}, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2:\n%s", code, out)
			}
			var lines []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "  - "+path) {
					lines = append(lines, l)
				}
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("%d mistakes reported, want %d:\n%s", len(lines), len(tc.want), out)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("mistake %d: %s\nwant: %s", i+1, lines[i], w)
				}
			}
		})
	}
}
