package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// FleetPhase is one measured phase of the fleet workload: a walrelay
// --config process running Pipelines pipelines, its steady RSS (median of
// samples every 500 ms) and its CPU over the window.
type FleetPhase struct {
	Kind      string  `json:"kind"` // "idle" or "load"
	Pipelines int     `json:"pipelines"`
	Seconds   float64 `json:"seconds"`
	RSSMiB    float64 `json:"rss_mib"`
	AnonMiB   float64 `json:"rss_anon_mib"`
	CPUCores  float64 `json:"cpu_cores"` // CPU seconds per second
	ReadyS    float64 `json:"start_to_ready_s,omitempty"`
	// PGConns is the connections walrelay holds to the pipelines'
	// databases (pg_stat_activity), per pipeline.
	PGConnsPerPipeline float64 `json:"pg_connections_per_pipeline,omitempty"`
	// Load phases: the target and achieved event rates (all pipelines),
	// the events written, and how long after the writers stopped every
	// slot was confirmed past the last write.
	TargetRate   int     `json:"target_events_per_s,omitempty"`
	AchievedRate float64 `json:"achieved_events_per_s,omitempty"`
	Events       int64   `json:"events,omitempty"`
	CatchUpS     float64 `json:"writes_end_to_all_confirmed_s,omitempty"`
	// CPUPer1000 is walrelay's CPU seconds from the writers' start until
	// every slot is confirmed past the writes, per 1,000 events: what the
	// events cost when the writers (on the same cores) fall short of the
	// target rate and walrelay catches up after them.
	CPUPer1000 float64 `json:"cpu_s_per_1000_events,omitempty"`
	// KafkaConns is the TCP connections walrelay holds to the brokers
	// (/proc), idle phases.
	KafkaConns int    `json:"kafka_connections,omitempty"`
	Error      string `json:"error,omitempty"`
}

// FleetDrain is Pipelines backlogs drained at once, by one walrelay
// --config process or by as many pg_recvlogical processes.
type FleetDrain struct {
	Relay        string  `json:"relay"`
	Pipelines    int     `json:"pipelines"`
	Events       int64   `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_s"`
	// StreamingS is from the start until every slot streams (or is
	// already drained); EventsPerSecStreaming counts from then.
	StreamingS            float64 `json:"start_to_all_streaming_s"`
	EventsPerSecStreaming float64 `json:"events_per_s_from_all_streaming"`
	// InKafkaS (walrelay): from the start until the drain's topic's end
	// offsets sum to the events; EventsPerSecInKafka counts to then.
	InKafkaS            float64 `json:"start_to_all_in_kafka_s,omitempty"`
	EventsPerSecInKafka float64 `json:"events_per_s_to_all_in_kafka,omitempty"`
	CPUS                float64 `json:"cpu_s"`
	WalsenderCPUS       float64 `json:"walsenders_cpu_s"`       // fleetcpu.go
	BrokerCPUS          float64 `json:"broker_cpu_s,omitempty"` // walrelay's drains
	PeakRSSMiB          float64 `json:"peak_rss_mib"`
	Error               string  `json:"error,omitempty"`
	Round               int     `json:"round"` // fleetdrain.go
}

// FleetRun is the fleet workload's results.
type FleetRun struct {
	Requested int          `json:"pipelines_requested"`
	Pipelines int          `json:"pipelines"`
	Limit     string       `json:"limit,omitempty"` // why fewer than requested
	Backlog   int          `json:"drain_backlog_per_pipeline"`
	Phases    []FleetPhase `json:"phases"`
	// HeapProfile is the N idle pipelines' heap profile (go tool pprof).
	HeapProfile string       `json:"heap_profile,omitempty"`
	Drains      []FleetDrain `json:"drains"`
	// PerIdlePipelineMiB: (N idle − 1 idle) / (N − 1).
	PerIdlePipelineMiB float64 `json:"rss_per_idle_pipeline_mib"`
	// DrainRatio: the median of the rounds' ratios, each from its start
	// (FleetDrainRound); DrainRatioStreaming from all streaming.
	DrainRatio          float64 `json:"drain_ratio_walrelay_to_pg_recvlogical"`
	DrainRatioStreaming float64 `json:"drain_ratio_from_all_streaming"`
	// DrainRatioInKafka counts walrelay's drain to its last record in
	// Kafka rather than to its last confirmation.
	DrainRatioInKafka float64 `json:"drain_ratio_walrelay_in_kafka_to_pg_recvlogical"`
	// DrainRatioBefore*: walrelay-before's (BENCH_WALRELAY_BEFORE).
	DrainRatioBefore          float64           `json:"drain_ratio_before_to_pg_recvlogical,omitempty"`
	DrainRatioBeforeStreaming float64           `json:"drain_ratio_before_from_all_streaming,omitempty"`
	DrainRounds               []FleetDrainRound `json:"drain_rounds"`
}

const (
	fleetRatePerPipeline = 100
	fleetIdleWindow      = 20 * time.Second
	fleetLoadWindow      = 20 * time.Second
)

// runFleet measures walrelay --config with many pipelines, one database
// each, on the bed's PostgreSQL (see bench/README.md, "Fleet").
func (b *bench) runFleet(ctx context.Context) error {
	run := time.Now().Format("150405")
	fr := &FleetRun{Requested: b.cfg.fleetPipelines, Backlog: b.cfg.fleetBacklog}
	b.res.Fleet = fr
	// N.B. on a PostgreSQL of its own, whose limits fit the pipelines
	// (fleetpg.go); the bench's other workloads keep the bed's.
	pg, err := b.fleetPostgresFor(ctx, b.cfg.fleetPipelines, b.cfg.fleetDrain)
	if err != nil {
		return err
	}
	defer pg.stop()
	bedURL := b.env.PGURL
	b.env.PGURL = pg.url
	defer func() { b.env.PGURL = bedURL }()
	n, limit, err := b.fleetCap(ctx, b.cfg.fleetPipelines)
	if err != nil {
		return err
	}
	fr.Pipelines, fr.Limit = n, limit
	if limit != "" {
		logf("fleet: %s", limit)
	}
	logf("fleet: creating %d databases", n)
	dsns := make([]string, n)
	for i := range dsns {
		if dsns[i], err = testbed.FreshDatabase(ctx, b.env.PGURL, fmt.Sprintf("walrelay_fleet_%03d", i)); err != nil {
			return err
		}
		if err := testbed.Exec(ctx, dsns[i], rig.OutboxDDL+`; ALTER TABLE outbox SET (autovacuum_enabled = false)`); err != nil {
			return fmt.Errorf("create outbox: %w", err)
		}
	}
	defer func() {
		for i := range dsns {
			if err := testbed.DropDatabase(context.WithoutCancel(ctx), b.env.PGURL, fmt.Sprintf("walrelay_fleet_%03d", i)); err != nil {
				logf("fleet: %v", err)
			}
		}
	}()
	slots := make([]string, n)
	for i := range slots {
		slots[i] = fmt.Sprintf("fl%s_%03d", run, i)
		if _, err := rig.CreateSlot(ctx, dsns[i], slots[i], "fleet_pub"); err != nil {
			return err
		}
	}
	typ := "fleet_" + run
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, "wrfleet."+typ); err != nil {
		return err
	}
	var errs []error
	// (a) one pipeline idle.
	if ph, _, err := b.fleetPhases(ctx, dsns[:1], slots[:1], "", false); err != nil {
		errs = append(errs, err)
	} else {
		fr.Phases = append(fr.Phases, ph...)
	}
	// (b) and (c): every pipeline idle, then written to.
	if ph, _, err := b.fleetPhases(ctx, dsns, slots, typ, true); err != nil {
		errs = append(errs, err)
	} else {
		fr.Phases = append(fr.Phases, ph...)
	}
	for _, s := range slots {
		if err := testbed.Exec(context.WithoutCancel(ctx), b.env.PGURL, `SELECT pg_drop_replication_slot($1)`, s); err != nil {
			logf("fleet: drop slot %s: %v", s, err)
		}
	}
	if len(fr.Phases) >= 2 && n > 1 {
		fr.PerIdlePipelineMiB = round((fr.Phases[1].RSSMiB-fr.Phases[0].RSSMiB)/float64(n-1), 2)
	}
	// (d) drains at once.
	d := min(b.cfg.fleetDrain, n)
	if err := b.fleetDrains(ctx, dsns[:d], run); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// fleetCap is how many pipelines the bed's PostgreSQL can take: a slot and
// a walsender each, and four connections (walrelay's three: the walsender's
// and two others, measured; and a writer's).
func (b *bench) fleetCap(ctx context.Context, want int) (int, string, error) {
	conn, err := pgx.Connect(ctx, b.env.PGURL)
	if err != nil {
		return 0, "", fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var slots, senders, conns, usedSlots, usedConns int
	err = conn.QueryRow(ctx, `SELECT current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int,
		current_setting('max_connections')::int, (SELECT count(*) FROM pg_replication_slots)::int, (SELECT count(*) FROM pg_stat_activity)::int`).
		Scan(&slots, &senders, &conns, &usedSlots, &usedConns)
	if err != nil {
		return 0, "", fmt.Errorf("read the replication limits: %w", err)
	}
	n := want
	var why []string
	if c := slots - usedSlots - 2; c < n {
		n, why = c, append(why, fmt.Sprintf("max_replication_slots %d (%d in use)", slots, usedSlots))
	}
	if c := senders - 2; c < n {
		n, why = c, append(why, fmt.Sprintf("max_wal_senders %d", senders))
	}
	if c := (conns - usedConns - 20) / 4; c < n {
		n, why = c, append(why, fmt.Sprintf("max_connections %d (%d in use; 4 a pipeline: walrelay's 3 and a writer)", conns, usedConns))
	}
	if n < 2 {
		return 0, "", fmt.Errorf("fleet: the bed's PostgreSQL takes %d pipelines (%s)", n, strings.Join(why, ", "))
	}
	if n == want {
		return n, "", nil
	}
	return n, fmt.Sprintf("%d pipelines, not %d: the bed's PostgreSQL (test/testbed/postgres.go) has %s", n, want, strings.Join(why, ", ")), nil
}

// fleetFile writes a fleet file of one pipeline per database and returns
// its path and the HTTP address.
func (b *bench) fleetFile(dsns, slots []string, tag string) (string, string, error) {
	dir := b.logDir("fleet-" + tag)
	addr := freeAddr()
	var f strings.Builder
	fmt.Fprintf(&f, "brokers: %s\nhttp-addr: %s\nhttp-pprof: true\nlog-level: %s\n", strings.Join(b.env.Brokers, ","), addr, b.cfg.logLevel)
	fmt.Fprintf(&f, "defaults:\n  table: public.outbox\n  header-columns: type:eventType\n  topic: \"wrfleet.${aggregatetype}\"\n  status-interval: %s\n", b.cfg.status)
	f.WriteString("pipelines:\n")
	for i := range dsns {
		uf := filepath.Join(dir, fmt.Sprintf("url_%03d", i))
		if err := os.WriteFile(uf, []byte(dsns[i]), 0o600); err != nil {
			return "", "", err
		}
		pub := "fleet_pub"
		if strings.HasPrefix(tag, "drain") {
			pub = "fleetdr_pub"
		}
		fmt.Fprintf(&f, "  - name: p%03d\n    pg-url-file: %s\n    slot: %s\n    publication: %s\n", i, uf, slots[i], pub)
	}
	path := filepath.Join(dir, "fleet.yaml")
	return path, addr, os.WriteFile(path, []byte(f.String()), 0o644)
}

// startFleet starts walrelay --config path and waits for /readyz.
func (b *bench) startFleet(ctx context.Context, path, addr, tag string) (*proc.Proc, float64, error) {
	p, err := rig.StartWalrelay(b.bin, filepath.Join(b.logDir("logs"), "fleet-"+tag+".log"), "--config", path)
	if err != nil {
		return nil, 0, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if p.Exited() {
			return nil, 0, fmt.Errorf("walrelay --config exited: %v\n%s", p.Err(), p.Tail(20))
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, time.Since(p.Started).Seconds(), nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = p.Stop(30 * time.Second)
	return nil, 0, fmt.Errorf("walrelay --config with %s: not ready after 5 minutes\n%s", tag, p.Tail(20))
}

// fleetPhases runs one walrelay over dsns: idle, and, when load, written to
// at fleetRatePerPipeline events/s each.
func (b *bench) fleetPhases(ctx context.Context, dsns, slots []string, typ string, load bool) ([]FleetPhase, float64, error) {
	tag := fmt.Sprintf("%d", len(dsns))
	path, addr, err := b.fleetFile(dsns, slots, tag)
	if err != nil {
		return nil, 0, err
	}
	p, ready, err := b.startFleet(ctx, path, addr, tag)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err := p.Stop(60 * time.Second); err != nil {
			logf("fleet: stop: %v", err)
		}
	}()
	// N.B. a few seconds to settle: the first status updates, the GC.
	time.Sleep(5 * time.Second)
	idle := b.fleetWindow(ctx, p, FleetPhase{Kind: "idle", Pipelines: len(dsns), ReadyS: round(ready, 1)}, fleetIdleWindow, nil)
	idle.PGConnsPerPipeline = b.fleetConns(ctx, len(dsns))
	idle.KafkaConns = b.kafkaConns(p.Pid())
	logf("fleet: %d pipelines idle: RSS %.1f MiB (anon %.1f), %.3f cores, ready after %.1f s, %.1f connections a pipeline",
		len(dsns), idle.RSSMiB, idle.AnonMiB, idle.CPUCores, idle.ReadyS, idle.PGConnsPerPipeline)
	out := []FleetPhase{idle}
	if len(dsns) > 1 {
		b.fleetHeap(ctx, addr)
	}
	if !load {
		return out, ready, nil
	}
	var written atomic.Int64
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var werrMu sync.Mutex
	var werr error
	writers := func() {
		for i := range dsns {
			wg.Add(1)
			go func(dsn string, i int) {
				defer wg.Done()
				if err := fleetWriter(wctx, dsn, typ, i, &written); err != nil && wctx.Err() == nil {
					werrMu.Lock()
					werr = errors.Join(werr, err)
					werrMu.Unlock()
				}
			}(dsns[i], i)
		}
	}
	ph := FleetPhase{Kind: "load", Pipelines: len(dsns), TargetRate: fleetRatePerPipeline * len(dsns)}
	c0 := proc.CPUSeconds(p.Pid())
	ph = b.fleetWindow(ctx, p, ph, fleetLoadWindow, func() { writers() })
	stopWriters()
	wg.Wait()
	ph.Events = written.Load()
	ph.AchievedRate = round(float64(ph.Events)/ph.Seconds, 0)
	if werr != nil {
		ph.Error = werr.Error()
	}
	t := time.Now()
	if err := b.fleetWaitConfirmed(ctx, slots, nil, 3*time.Minute); err != nil && ph.Error == "" {
		ph.Error = err.Error()
	}
	ph.CatchUpS = round(time.Since(t).Seconds(), 1)
	if ph.Events > 0 {
		ph.CPUPer1000 = round((proc.CPUSeconds(p.Pid())-c0)/float64(ph.Events)*1000, 4)
	}
	logf("fleet: %d pipelines at %d events/s (achieved %.0f): RSS %.1f MiB (anon %.1f), %.3f cores; all confirmed %.1f s after the writes%s",
		len(dsns), ph.TargetRate, ph.AchievedRate, ph.RSSMiB, ph.AnonMiB, ph.CPUCores, ph.CatchUpS, errSuffix(ph.Error))
	return append(out, ph), ready, nil
}

// fleetWindow measures p's RSS and CPU over window, after start (if any).
func (b *bench) fleetWindow(ctx context.Context, p *proc.Proc, ph FleetPhase, window time.Duration, start func()) FleetPhase {
	s := rig.SampleRSS(p.Pid(), 500*time.Millisecond)
	c0 := proc.CPUSeconds(p.Pid())
	t0 := time.Now()
	if start != nil {
		start()
	}
	select {
	case <-ctx.Done():
	case <-time.After(window):
	}
	ph.Seconds = round(time.Since(t0).Seconds(), 1)
	ph.CPUCores = round((proc.CPUSeconds(p.Pid())-c0)/ph.Seconds, 3)
	pts := s.Stop()
	ph.RSSMiB, ph.AnonMiB = rig.SteadyMiB(pts, 0), rig.SteadyAnonMiB(pts, 0)
	if p.Exited() {
		ph.Error = "walrelay exited: " + p.Tail(5)
	}
	return ph
}

// fleetHeap saves the idle fleet's heap profile next to the results
// (DATE-HOST-fleet-heap.pprof): where each pipeline's memory goes.
func (b *bench) fleetHeap(ctx context.Context, addr string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		logf("fleet: heap profile: %v", err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		logf("fleet: heap profile: %s %v", resp.Status, err)
		return
	}
	path := b.base + "-fleet-heap.pprof"
	if err := os.WriteFile(path, body, 0o644); err != nil {
		logf("fleet: heap profile: %v", err)
		return
	}
	b.res.Fleet.HeapProfile = filepath.Base(path)
}

// fleetConns is walrelay's connections to the fleet's databases per
// pipeline (the bench's own are not open during the idle phases).
func (b *bench) fleetConns(ctx context.Context, n int) float64 {
	conn, err := pgx.Connect(ctx, b.env.PGURL)
	if err != nil {
		return 0
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var c int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname LIKE 'walrelay_fleet_%'`).Scan(&c); err != nil {
		return 0
	}
	return round(float64(c)/float64(n), 1)
}

// kafkaConns counts the TCP connections process pid holds to the bed's
// brokers (-1 when /proc cannot say).
func (b *bench) kafkaConns(pid int) int {
	n, err := harness.ConnectionsTo(pid, b.env.Brokers)
	if err != nil {
		return -1
	}
	return n
}

// fleetWriter writes fleetRatePerPipeline events a second to dsn until ctx
// ends: every 100 ms a transaction of a tenth of them.
func fleetWriter(ctx context.Context, dsn, typ string, i int, written *atomic.Int64) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	const per = fleetRatePerPipeline / 10
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seq := int64(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
			SELECT gen_random_uuid(), $1, 'agg-' || ($2::int * 1000 + i % 100), 'OrderCreated', bench_payload(i) FROM generate_series($3::bigint, $4::bigint) i`,
			typ, i, seq, seq+per-1); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("write events: %w", err)
		}
		seq += per
		written.Add(per)
	}
}

// fleetWaitConfirmed waits until every slot is confirmed at or past its
// target: targets[i], or (nil) the WAL's current end.
func (b *bench) fleetWaitConfirmed(ctx context.Context, slots []string, targets []pglogrepl.LSN, timeout time.Duration) error {
	conn, err := pgx.Connect(ctx, b.env.PGURL)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if targets == nil {
		var s string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
			return err
		}
		end, err := pglogrepl.ParseLSN(s)
		if err != nil {
			return err
		}
		targets = make([]pglogrepl.LSN, len(slots))
		for i := range targets {
			targets[i] = end
		}
	}
	want := make([]string, len(slots))
	for i := range targets {
		want[i] = targets[i].String()
	}
	deadline := time.Now().Add(timeout)
	for {
		var behind int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[], $2::text[]) AS w(slot, lsn)
			LEFT JOIN pg_replication_slots s ON s.slot_name = w.slot
			WHERE s.confirmed_flush_lsn IS NULL OR s.confirmed_flush_lsn < w.lsn::pg_lsn`, slots, want).Scan(&behind)
		if err != nil {
			return fmt.Errorf("read slots: %w", err)
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d slots not confirmed after %s", behind, len(slots), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fleetWaitStreaming waits until every slot has a walsender or is
// confirmed at or past its target, and returns the seconds since t0.
func (b *bench) fleetWaitStreaming(ctx context.Context, slots []string, targets []pglogrepl.LSN, t0 time.Time) float64 {
	conn, err := pgx.Connect(ctx, b.env.PGURL)
	if err != nil {
		return 0
	}
	defer conn.Close(context.WithoutCancel(ctx))
	want := make([]string, len(slots))
	for i := range targets {
		want[i] = targets[i].String()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var waiting int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[], $2::text[]) AS w(slot, lsn)
			LEFT JOIN pg_replication_slots s ON s.slot_name = w.slot
			WHERE s.active_pid IS NULL AND (s.confirmed_flush_lsn IS NULL OR s.confirmed_flush_lsn < w.lsn::pg_lsn)`, slots, want).Scan(&waiting)
		if err != nil || waiting == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return round(time.Since(t0).Seconds(), 2)
}

// fleetTable renders the fleet workload.
func fleetTable(res *Results) string {
	fr := res.Fleet
	if fr == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Fleet: %d pipelines (one database each) in one walrelay --config\n\n", fr.Pipelines)
	if fr.Limit != "" {
		fmt.Fprintf(&b, "%s.\n\n", fr.Limit)
	}
	fmt.Fprintf(&b, "Load: %d events/s a pipeline, a 10-row transaction every 100 ms on one connection per database. RSS: median of samples every 500 ms.\n\n", fleetRatePerPipeline)
	b.WriteString("| phase | pipelines | RSS MiB (anon) | CPU cores | events/s target / achieved | ready after s | PG conns / pipeline | all confirmed after writes s |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range fr.Phases {
		rate := "–"
		if p.Kind == "load" {
			rate = fmt.Sprintf("%d / %.0f", p.TargetRate, p.AchievedRate)
		}
		kind := p.Kind
		if p.Error != "" {
			kind += " (error: " + p.Error + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %.3f | %s | %s | %s | %s |\n", kind, p.Pipelines, rss(p.RSSMiB, p.AnonMiB), p.CPUCores, rate, f1(p.ReadyS), f1(p.PGConnsPerPipeline), f1(p.CatchUpS))
	}
	fmt.Fprintf(&b, "\nRSS per idle pipeline above one pipeline's: %.2f MiB (goal: at most 3).\n", fr.PerIdlePipelineMiB)
	for _, p := range fr.Phases {
		if p.KafkaConns > 0 {
			fmt.Fprintf(&b, "%d pipelines idle: %d connections to Kafka.\n", p.Pipelines, p.KafkaConns)
		}
		if p.CPUPer1000 > 0 {
			fmt.Fprintf(&b, "Under load: %.4f CPU s per 1,000 events, from the writers' start to every slot confirmed (%.2f cores at the target rate).\n",
				p.CPUPer1000, p.CPUPer1000*float64(p.TargetRate)/1000)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Drains at once, %d single-row transactions a database, in %d rounds; in each, one backlog and every relay's slots before it (one publication), the relays one after another, the order turned round each round:\n\n", fr.Backlog, len(fr.DrainRounds))
	b.WriteString("| round | relay | pipelines | events | s (from the start) | events/s | start to all streaming s | events/s from all streaming | all in Kafka s | CPU s | walsenders' CPU s | broker's CPU s | peak RSS MiB |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range fr.Drains {
		relay := d.Relay
		if d.Error != "" {
			relay += " (error: " + d.Error + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %d | %.2f | %.0f | %.2f | %.0f | %s | %s | %s | %s | %s |\n", d.Round, relay, d.Pipelines, d.Events, d.Seconds, d.EventsPerSec, d.StreamingS, d.EventsPerSecStreaming, f1(d.InKafkaS), f1(d.CPUS), f1(d.WalsenderCPUS), f1(d.BrokerCPUS), f1(d.PeakRSSMiB))
	}
	b.WriteString("\n| round | walrelay / pg_recvlogical from the start | from all streaming | to walrelay's last record in Kafka | walrelay-before from the start | from all streaming | load at start → end | busy share |\n|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, rd := range fr.DrainRounds {
		fmt.Fprintf(&b, "| %d | %.2f | %.2f | %.2f | %s | %s | %s → %s | %.2f |\n", rd.Round, rd.Ratio, rd.RatioStreaming, rd.RatioInKafka, f2(rd.RatioBefore), f2(rd.RatioBeforeStreaming), rd.LoadStart, rd.LoadEnd, rd.BusyShare)
	}
	fmt.Fprintf(&b, "\nwalrelay / pg_recvlogical aggregate, the rounds' median (goal: at least 0.9×): %.2f× each from its start (walrelay to its last confirmation, pg_recvlogical to its exit at its end position), %.2f× each from the moment all its slots stream, %.2f× to walrelay's last record in Kafka.\n", fr.DrainRatio, fr.DrainRatioStreaming, fr.DrainRatioInKafka)
	if fr.DrainRatioBefore > 0 {
		fmt.Fprintf(&b, "walrelay-before / pg_recvlogical: %.2f× from the start, %.2f× from all streaming.\n", fr.DrainRatioBefore, fr.DrainRatioBeforeStreaming)
	}
	return b.String()
}
