package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// The tracing workload's flags, here with the workload (not in config).
var (
	tracingRows     = flag.Int("tracing-rows", atoiOr(envOr("BENCH_TRACING_ROWS", ""), 100000), "tracing: single-row transactions in the backlog each setting drains, per round (BENCH_TRACING_ROWS)")
	tracingRounds   = flag.Int("tracing-rounds", atoiOr(envOr("BENCH_TRACING_ROUNDS", ""), 3), "tracing: rounds, the settings' order rotated each round; the report gives medians (BENCH_TRACING_ROUNDS)")
	tracingRate     = flag.Int("tracing-rate", atoiOr(envOr("BENCH_TRACING_RATE", ""), 1000), "tracing: events per second of the latency run (BENCH_TRACING_RATE)")
	tracingDuration = flag.String("tracing-duration", envOr("BENCH_TRACING_DURATION", "20s"), "tracing: how long each setting's latency run writes, after 5 s unmeasured; 0: no latency runs, the drains only (BENCH_TRACING_DURATION)")
	tracingSpans    = flag.String("tracing-spans-file", envOr("BENCH_TRACING_SPANS_FILE", os.DevNull), "tracing: where the Collector writes the spans it receives (its file exporter's JSON; each setting's service.name is walrelay-bench-SETTING), to count them (BENCH_TRACING_SPANS_FILE)")
	tracingOnly     = flag.String("tracing-settings", envOr("BENCH_TRACING_SETTINGS", ""), "tracing: the settings to run, comma-separated names (none, off, unsampled, 10pct, 100pct, off-before, 100pct-before); empty: all (BENCH_TRACING_SETTINGS)")
)

// tracingMode is one tracing setting of walrelay.
type tracingMode struct {
	name, setting string
	args          []string // more walrelay run flags
	otel          []string // OTEL_* environment; the Collector's endpoint added
	// before: run -walrelay-before's binary (BENCH_WALRELAY_BEFORE), not
	// the tree's.
	before bool
}

// tracingModes are compared side by side, every row carrying a sampled
// writer's context (the Quarkus outbox extension's Properties text): not
// read at all, read without span export (the writer's context copied into
// the headers: tracing off), span export configured but nothing sampled
// (ratio 0: a span started per event, not recording), one in ten sampled
// (ratio 0.1, the parent ignored), every event sampled (the default
// parent-based sampler following the writers).
var tracingModes = []tracingMode{
	{"none", "--trace-context-column -", []string{"--trace-context-column", "-"}, nil, false},
	{"off", "no OTEL_* (headers copied)", nil, nil, false},
	{"unsampled", "OTEL_TRACES_SAMPLER=traceidratio, ARG 0", nil, []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0"}, false},
	{"10pct", "OTEL_TRACES_SAMPLER=traceidratio, ARG 0.1", nil, []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"}, false},
	{"100pct", "default sampler, writers sampled", nil, nil, false},
}

// tracingBefore are the settings run with -walrelay-before's binary too,
// when given, for before/after figures of a change from one run.
var tracingBefore = []tracingMode{
	{"off-before", "off, the -walrelay-before binary", nil, nil, true},
	{"100pct-before", "100pct, the -walrelay-before binary", nil, nil, true},
}

// tracingExtra are settings run only when BENCH_TRACING_SETTINGS names
// them: 100pct with a queue no 100,000-event drain fills (a span dropped
// costs less than one exported: the CPU of every span exported).
var tracingExtra = []tracingMode{
	{"100pct-bigqueue", "100pct, OTEL_BSP_MAX_QUEUE_SIZE=262144", nil, []string{"OTEL_BSP_MAX_QUEUE_SIZE=262144", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2048"}, false},
}

// tracingSettings are the settings this run compares: tracingModes, and
// tracingBefore with a -walrelay-before binary; tracingExtra when named.
func (b *bench) tracingSettings() []tracingMode {
	all := tracingModes
	if b.cfg.walrelayBefore != "" {
		all = append(append([]tracingMode{}, tracingModes...), tracingBefore...)
	}
	if *tracingOnly == "" {
		return all
	}
	all = append(append([]tracingMode{}, all...), tracingExtra...)
	var some []tracingMode
	for _, m := range all {
		if slices.Contains(strings.Split(*tracingOnly, ","), m.name) {
			some = append(some, m)
		}
	}
	return some
}

// exports reports whether setting m exports spans.
func (m tracingMode) exports() bool {
	return !strings.HasPrefix(m.name, "none") && !strings.HasPrefix(m.name, "off")
}

// TracingRun is one tracing setting over the tracing workload: a drain of
// the backlog, then a latency run at a steady rate.
type TracingRun struct {
	Round   int    `json:"round"`
	Mode    string `json:"mode"`
	Setting string `json:"setting"`
	Exports bool   `json:"exports_spans"`
	// Drain: from walrelay's start to the slot confirmed past the
	// backlog's marker.
	DrainEvents    int     `json:"drain_events"`
	DrainS         float64 `json:"drain_s"`
	DrainPerS      float64 `json:"drain_events_per_s"`
	DrainCPUS      float64 `json:"drain_cpu_s"`
	DrainUSPerEv   float64 `json:"drain_cpu_us_per_event"`
	DrainCollector float64 `json:"drain_collector_cpu_s"`
	// FlushesGaveUp is walrelay_trace_flushes_total{outcome="gave_up"}
	// at the end of the drain and of the latency run: span exports that
	// took over a second before a confirmation.
	DrainGaveUp float64 `json:"drain_flushes_gave_up"`
	// DrainSpansExported and DrainSpansDropped are
	// walrelay_trace_spans_total{outcome="exported"} and {"dropped"} at
	// the end of the drain: a span dropped (the queue full) costs less
	// than one exported.
	DrainSpansExported float64 `json:"drain_spans_exported"`
	DrainSpansDropped  float64 `json:"drain_spans_dropped"`
	LatGaveUp          float64 `json:"latency_flushes_gave_up"`
	// Latency run at Rate for its seconds: insert to consume, walrelay's
	// CPU per event, the Collector's CPU.
	Rate         int     `json:"rate"`
	Sent         int     `json:"sent"`
	Received     int     `json:"received"`
	Latency      Stats   `json:"insert_to_consume"`
	LatCPUS      float64 `json:"latency_cpu_s"`
	LatUSPerEv   float64 `json:"latency_cpu_us_per_event"`
	LatCollector float64 `json:"latency_collector_cpu_s"`
	Error        string  `json:"error,omitempty"`
}

// traceColumnDDL gives every outbox row a sampled writer's context, as the
// Quarkus outbox extension writes it (a fresh trace per row), through the
// column's default: the fill procedure and the latency writers insert
// without naming it.
const traceColumnDDL = `CREATE OR REPLACE FUNCTION bench_traceparent() RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT E'#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-' || md5(random()::text) || '-' || left(md5(random()::text), 16) || E'-01\n'
$$;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS tracingspancontext text DEFAULT bench_traceparent()`

// runTracing runs the tracing workload: one backlog drained by each
// setting in turn, then a latency run per setting, the spans going to a
// real OpenTelemetry Collector (tools/otelcol) on the same machine that
// keeps none of them.
func (b *bench) runTracing(ctx context.Context) error {
	dur, err := time.ParseDuration(*tracingDuration)
	if err != nil {
		return fmt.Errorf("-tracing-duration %q: %w", *tracingDuration, err)
	}
	if len(b.tracingSettings()) == 0 {
		return fmt.Errorf("-tracing-settings %q: no such setting", *tracingOnly)
	}
	if err := b.execSQL(ctx, traceColumnDDL); err != nil {
		return fmt.Errorf("tracing: add the trace-context column: %w", err)
	}
	defer func() {
		if err := b.execSQL(context.WithoutCancel(ctx), `ALTER TABLE outbox DROP COLUMN IF EXISTS tracingspancontext`); err != nil {
			logf("tracing: drop the trace-context column: %v", err)
		}
	}()
	col, err := testbed.RunCollector(ctx, b.logDir("otelcol"), *tracingSpans, logf)
	if err != nil {
		return err
	}
	defer col.Stop()
	var errs []error
	for rd := 1; rd <= *tracingRounds && ctx.Err() == nil; rd++ {
		// N.B. the order rotates: on a busy machine a setting's place in
		// the round would otherwise be part of its figure.
		all := b.tracingSettings()
		modes := append(append([]tracingMode{}, all[(rd-1)%len(all):]...), all[:(rd-1)%len(all)]...)
		runs := make([]TracingRun, len(modes))
		for i, m := range modes {
			runs[i] = TracingRun{Round: rd, Mode: m.name, Setting: m.setting, Exports: m.exports(), Rate: *tracingRate}
		}
		if err := b.tracingDrains(ctx, col, modes, runs, rd); err != nil {
			errs = append(errs, err)
		}
		for i, m := range modes {
			if ctx.Err() != nil || dur == 0 {
				break
			}
			b.tracingLatency(ctx, col, m, &runs[i], dur, rd)
		}
		for _, r := range runs {
			if r.Error != "" {
				errs = append(errs, fmt.Errorf("tracing %s round %d: %s", r.Mode, rd, r.Error))
			}
			logf("tracing round %d, %s: drain %d events in %.2fs (%.0f/s), %.2f µs CPU an event (Collector %.1fs, exports given up %.0f, spans exported %.0f dropped %.0f); %d/s: p50 %.1f p99 %.1f ms, %.2f µs CPU an event (Collector %.1fs, exports given up %.0f)%s",
				rd, r.Mode, r.DrainEvents, r.DrainS, r.DrainPerS, r.DrainUSPerEv, r.DrainCollector, r.DrainGaveUp, r.DrainSpansExported, r.DrainSpansDropped, r.Rate, r.Latency.P50, r.Latency.P99, r.LatUSPerEv, r.LatCollector, r.LatGaveUp, errSuffix(r.Error))
		}
		b.res.Tracing = append(b.res.Tracing, runs...)
	}
	return errors.Join(errs...)
}

// tracingDrains fills one backlog, every setting's slot created first, and
// lets each setting drain it in turn.
func (b *bench) tracingDrains(ctx context.Context, col *testbed.Collector, modes []tracingMode, runs []TracingRun, n int) error {
	typ := "tracing" + strconv.Itoa(n)
	var topics []string
	for _, m := range modes {
		slot := slotName("tracing", m.name)
		if _, err := rig.CreateSlot(ctx, b.dsn, slot, slot); err != nil {
			return err
		}
		defer func() {
			if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slot, slot); err != nil {
				logf("%v", err)
			}
		}()
		topics = append(topics, tracingPrefix(m)+typ, tracingPrefix(m)+typ+"_warm", tracingPrefix(m)+typ+"_lat")
	}
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topics...); err != nil {
		return err
	}
	rows := *tracingRows
	logf("tracing: committing %d rows, each with a writer's trace context", rows)
	if err := b.fillTracing(ctx, typ, rows); err != nil {
		return err
	}
	end, err := rig.Marker(ctx, b.dsn, typ)
	if err != nil {
		return err
	}
	for i, m := range modes {
		if ctx.Err() != nil {
			break
		}
		r := &runs[i]
		r.DrainEvents = rows + 2 // the marker's two
		slot := slotName("tracing", m.name)
		w, err := rig.NewSlotWatcher(ctx, b.dsn)
		if err != nil {
			return err
		}
		col0 := col.CPU()
		profile := ""
		if b.profiling {
			// N.B. the drain's profile only (BENCH_PROFILE=1).
			profile, _ = filepath.Abs(fmt.Sprintf("%s-tracing%d-%s.pprof", b.base, n, m.name))
		}
		rl, err := b.startTracing(ctx, m, slot, col, profile)
		if err != nil {
			w.Close()
			r.Error = err.Error()
			continue
		}
		deadline := rl.t0.Add(b.cfg.drainTimeout)
		for {
			st, err := w.State(ctx, slot)
			if err != nil {
				r.Error = err.Error()
				break
			}
			if st.ConfirmedFlush >= end {
				r.DrainS = round(time.Since(rl.t0).Seconds(), 3)
				break
			}
			if err := rl.check(ctx); err != nil {
				r.Error = err.Error()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.Error = fmt.Sprintf("slot %s confirmed %s, not yet %s: %v", slot, st.ConfirmedFlush, end, rig.ErrTimeout)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		w.Close()
		r.DrainGaveUp, _ = scrapeGauge(ctx, rl.metrics, gaveUpMetric)
		r.DrainSpansExported, _ = scrapeGauge(ctx, rl.metrics, `walrelay_trace_spans_total{outcome="exported"}`)
		r.DrainSpansDropped, _ = scrapeGauge(ctx, rl.metrics, `walrelay_trace_spans_total{outcome="dropped"}`)
		r.DrainCPUS = round(rl.cpu(), 2)
		r.DrainCollector = round(col.CPU()-col0, 2)
		if err := rl.stop(); err != nil && r.Error == "" {
			r.Error = "stop: " + err.Error()
		}
		if r.DrainS > 0 {
			r.DrainPerS = round(float64(r.DrainEvents)/r.DrainS, 0)
			r.DrainUSPerEv = round(r.DrainCPUS/float64(r.DrainEvents)*1e6, 2)
		}
		if n, err := b.adm.EndOffsets(ctx, tracingPrefix(m)+typ); err != nil && r.Error == "" {
			r.Error = "count records: " + err.Error()
		} else if n < int64(r.DrainEvents) && r.Error == "" {
			r.Error = fmt.Sprintf("slot confirmed but %s holds %d of %d records", tracingPrefix(m)+typ, n, r.DrainEvents)
		}
	}
	return nil
}

// fillTracing commits rows single-row transactions over fillConns
// connections (bench_fill: the column's default gives each a context).
func (b *bench) fillTracing(ctx context.Context, typ string, rows int) error {
	conns := b.cfg.fillConns
	per := (rows + conns - 1) / conns
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for c := range conns {
		from, to := c*per, min((c+1)*per, rows)-1
		if from > to {
			continue
		}
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, b.dsn)
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close(context.WithoutCancel(ctx))
			if _, err := conn.Exec(ctx, `CALL bench_fill($1, $2, $3, $4)`, typ, int64(from), int64(to), b.cfg.aggregates); err != nil {
				errc <- fmt.Errorf("fill tracing: %w", err)
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// tracingLatency runs setting m on a fresh slot: 5 s unmeasured, then
// rows at the workload's rate for dur, read back by a consumer.
func (b *bench) tracingLatency(ctx context.Context, col *testbed.Collector, m tracingMode, r *TracingRun, dur time.Duration, n int) {
	typ := "tracing" + strconv.Itoa(n)
	slot := slotName("tracinglat", m.name)
	if _, err := rig.CreateSlot(ctx, b.dsn, slot, slot); err != nil {
		r.Error = err.Error()
		return
	}
	defer func() {
		if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slot, slot); err != nil {
			logf("%v", err)
		}
	}()
	rl, err := b.startTracing(ctx, m, slot, col, "")
	if err != nil {
		r.Error = err.Error()
		return
	}
	defer func() {
		if err := rl.stop(); err != nil && r.Error == "" {
			r.Error = "stop: " + err.Error()
		}
	}()
	// N.B. unmeasured first, on a topic of its own: the relay streams and
	// is warm before the measured run, whose consumer reads only its own.
	seq := int64(20_000_000 + n*1_000_000)
	warmCons, err := newLatencyConsumer(ctx, b.env.Brokers, tracingPrefix(m)+typ+"_warm")
	if err != nil {
		r.Error = err.Error()
		return
	}
	warm, err := writeAtRate(ctx, b.dsn, typ+"_warm", r.Rate, 5*time.Second, b.cfg.aggregates, seq)
	if err == nil {
		err = b.waitReceived(ctx, rl, warmCons, warm)
	}
	warmCons.close()
	if err != nil {
		r.Error = "warm-up: " + err.Error()
		return
	}
	seq += int64(warm)
	cons, err := newLatencyConsumer(ctx, b.env.Brokers, tracingPrefix(m)+typ+"_lat")
	if err != nil {
		r.Error = err.Error()
		return
	}
	defer cons.close()
	cpu0, col0 := rl.cpu(), col.CPU()
	var l Latency
	sent := b.writePhase(ctx, &l, typ+"_lat", r.Rate, dur, seq)
	if err := b.waitReceived(ctx, rl, cons, sent); err != nil && l.Error == "" {
		l.Error = err.Error()
	}
	r.LatGaveUp, _ = scrapeGauge(ctx, rl.metrics, gaveUpMetric)
	r.LatCPUS = round(rl.cpu()-cpu0, 2)
	r.LatCollector = round(col.CPU()-col0, 2)
	cons.finish(&l, sent, 0)
	r.Sent, r.Received, r.Latency = sent, l.Received, l.InsertToConsume
	if sent > 0 {
		r.LatUSPerEv = round(r.LatCPUS/float64(sent)*1e6, 2)
	}
	if l.Error != "" {
		r.Error = l.Error
	}
}

// waitReceived waits up to two minutes for the consumer to hold n records.
func (b *bench) waitReceived(ctx context.Context, rl *running, cons *latencyConsumer, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for cons.received() < n {
		if err := rl.check(ctx); err != nil {
			return err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("received %d of %d records: %w", cons.received(), n, rig.ErrTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

const gaveUpMetric = `walrelay_trace_flushes_total{outcome="gave_up"}`

// tracingPrefix is where setting m's records go.
func tracingPrefix(m tracingMode) string { return "tr" + m.name + "." }

// startTracing starts walrelay with setting m on slot (and its
// publication), its spans, if any, to col over OTLP/HTTP, its CPU
// profile to profile if not "".
func (b *bench) startTracing(ctx context.Context, m tracingMode, slot string, col *testbed.Collector, profile string) (*running, error) {
	args := append(b.walrelayArgs(slot, slot, false, profile), "--topic", tracingPrefix(m)+"${aggregatetype}")
	args = append(args, m.args...)
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WALRELAY_") && !strings.HasPrefix(kv, "WALRELAY_TEST_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	if m.exports() {
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+col.HTTP, "OTEL_SERVICE_NAME=walrelay-bench-"+m.name)
		env = append(env, m.otel...)
	}
	r := &running{relay: "walrelay-tracing-" + m.name}
	if b.httpAddr {
		port, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		args = append(args, "--http-addr", "127.0.0.1:"+strconv.Itoa(port))
		r.metrics = "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	}
	logf("tracing: starting walrelay (%s)", m.setting)
	r.t0 = time.Now()
	bin := b.bin
	if m.before {
		bin = b.cfg.walrelayBefore
	}
	p, err := rig.StartProc("walrelay", filepath.Join(b.logDir("logs"), slot+"-"+time.Now().Format("150405")+".log"), env,
		append([]string{bin, "run"}, args...)...)
	if err != nil {
		return nil, err
	}
	r.proc = p
	return r, nil
}

// execSQL runs sql on the benchmark's database.
func (b *bench) execSQL(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// tracingTable is the tracing workload's side-by-side table: per setting
// the median over the rounds, and their range.
func tracingTable(res *Results) string {
	if len(res.Tracing) == 0 {
		return ""
	}
	type fig struct{ drainRate, drainUS, p50, p99, latUS, colDrain, colLat, dropped []float64 }
	figs := map[string]*fig{}
	var errs []string
	for _, r := range res.Tracing {
		f := figs[r.Mode]
		if f == nil {
			f = &fig{}
			figs[r.Mode] = f
		}
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("round %d %s: %s", r.Round, r.Mode, r.Error))
		}
		if r.DrainS > 0 {
			f.drainRate, f.drainUS, f.colDrain = append(f.drainRate, r.DrainPerS), append(f.drainUS, r.DrainUSPerEv), append(f.colDrain, r.DrainCollector)
			f.dropped = append(f.dropped, r.DrainSpansDropped)
		}
		if r.Sent > 0 {
			f.p50, f.p99, f.latUS, f.colLat = append(f.p50, r.Latency.P50), append(f.p99, r.Latency.P99), append(f.latUS, r.LatUSPerEv), append(f.colLat, r.LatCollector)
		}
	}
	med := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		ys := append([]float64{}, xs...)
		sort.Float64s(ys)
		return ys[len(ys)/2]
	}
	cell := func(xs []float64, digits int, base []float64) string {
		if len(xs) == 0 {
			return "-"
		}
		ys := append([]float64{}, xs...)
		sort.Float64s(ys)
		out := strconv.FormatFloat(med(xs), 'f', digits, 64)
		if base != nil && med(base) > 0 {
			out += fmt.Sprintf(" (%+.0f %%)", (med(xs)/med(base)-1)*100)
		}
		if len(ys) > 1 {
			out += fmt.Sprintf(" [%s-%s]", strconv.FormatFloat(ys[0], 'f', digits, 64), strconv.FormatFloat(ys[len(ys)-1], 'f', digits, 64))
		}
		return out
	}
	off := figs["off"]
	if off == nil {
		off = &fig{}
	}
	var sb strings.Builder
	sb.WriteString("\n## Tracing (OpenTelemetry spans to a real Collector on the same machine)\n\n")
	fmt.Fprintf(&sb, "Every row carries a sampled writer's context. Medians over the rounds [their range]; percentages against `off` (the column read, no span export; `100pct-before` against `off-before`, the -walrelay-before binary's). Latency runs at %d events/s.\n\n", res.Tracing[0].Rate)
	sb.WriteString("| setting | drain events/s | drain CPU µs/event | Collector CPU s (drain) | spans dropped (drain) | p50 ms | p99 ms | CPU µs/event at the rate | Collector CPU s |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range append(append(append([]tracingMode{}, tracingModes...), tracingExtra...), tracingBefore...) {
		f := figs[m.name]
		if f == nil {
			continue
		}
		var base fig
		switch {
		case m.name == "100pct-before" && figs["off-before"] != nil:
			// N.B. against the same binary's off.
			base = *figs["off-before"]
		case m.name != "off":
			base = *off
		}
		fmt.Fprintf(&sb, "| %s: %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.name, m.setting,
			cell(f.drainRate, 0, base.drainRate), cell(f.drainUS, 2, base.drainUS), cell(f.colDrain, 1, nil), cell(f.dropped, 0, nil),
			cell(f.p50, 1, nil), cell(f.p99, 1, nil), cell(f.latUS, 1, base.latUS), cell(f.colLat, 1, nil))
	}
	for _, e := range errs {
		fmt.Fprintf(&sb, "\nERROR: %s\n", e)
	}
	return sb.String()
}
