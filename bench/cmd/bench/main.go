package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/bench/internal/rig"
)

// Relay names.
const (
	relayRecv = "pg_recvlogical"
	relayNull = "walrelay-null"
	// beforeSuffix names a walrelay relay (walrelay-before,
	// walrelay-null-before) run with -walrelay-before's binary.
	beforeSuffix  = "-before"
	relayWalrelay = "walrelay"
	relayEOS      = "walrelay-eos" // walrelay --exactly-once
	relayNew      = "walrelay-new" // walrelay on topics it creates (wrnew.*)
	relayDebezium = "debezium"
)

type config struct {
	rows         int
	batchTx      int
	batchRows    int
	aggregates   int
	fillConns    int
	relays       []string
	workloads    []string
	w2Rates      []int
	w2Duration   time.Duration
	w2Warmup     time.Duration
	drainTimeout time.Duration
	partitions   int
	status       time.Duration
	profile      bool
	outDir       string
	walrelayBin  string
	// newtopic workload
	walrelayBefore string
	walrelayArgs   []string
	newTopics      int
	newTopicRounds int
	db             string
	// crash workload
	crashRate  int
	crashEvery time.Duration
	crashKills int
	// startup workload
	startupRounds int
	// fleet workload
	fleetPipelines int
	fleetDrain     int
	fleetBacklog   int
	keepLogs       bool
	logLevel       string

	// fleetDrainRounds: drain rounds, relays alternating (fleetdrain.go)
	fleetDrainRounds int
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func parseConfig() (*config, error) {
	c := &config{}
	fs := flag.CommandLine
	rows := fs.String("rows", envOr("BENCH_ROWS", "1000000"), "W1: single-row transactions in the backlog (BENCH_ROWS)")
	batchTx := fs.String("batch-tx", envOr("BENCH_BATCH_TX", "10"), "W1: large transactions in the second backlog (BENCH_BATCH_TX)")
	batchRows := fs.String("batch-rows", envOr("BENCH_BATCH_ROWS", "100000"), "W1: rows per large transaction (BENCH_BATCH_ROWS)")
	aggs := fs.String("aggregates", envOr("BENCH_AGGREGATES", "10000"), "distinct aggregate ids (BENCH_AGGREGATES)")
	fill := fs.String("fill-conns", envOr("BENCH_FILL_CONNS", "2"), "connections committing the W1 backlog (BENCH_FILL_CONNS)")
	relays := fs.String("relays", envOr("BENCH_RELAYS", strings.Join([]string{relayRecv, relayNull, relayWalrelay, relayDebezium}, ",")), "relays to run, in order (BENCH_RELAYS)")
	workloads := fs.String("workloads", envOr("BENCH_WORKLOADS", "w1,w1batch,w2,crash,startup,inbox,tracing,fleet"), "workloads: startup (walrelay's start to streaming and to the first record in Kafka), w1 (single-row backlog), w1batch (large transactions), w2 (latency), crash (kill -9 at a steady rate, default settings: duplicates per crash), newtopic (first records on new topics; not in the default), wmsg (rows vs logical decoding messages: WAL per event, drain rate; not in the default), inbox (package inbox's consumer: records/s over 6 partitions, duplicates after a kill -9), tracing (OpenTelemetry spans to a real Collector: a drain and a latency run per tracing setting, side by side), fleet (walrelay --config with many pipelines, one database each: RSS and CPU idle and at 100 events/s each, and drains at once against as many pg_recvlogical) (BENCH_WORKLOADS)")
	rates := fs.String("w2-rates", envOr("BENCH_W2_RATES", "1000,5000"), "W2: events per second (BENCH_W2_RATES)")
	w2d := fs.String("w2-duration", envOr("BENCH_W2_DURATION", "60s"), "W2: how long each rate is written (BENCH_W2_DURATION)")
	w2w := fs.String("w2-warmup", envOr("BENCH_W2_WARMUP", "30s"), "W2: unmeasured writing before the first rate (BENCH_W2_WARMUP)")
	drain := fs.String("drain-timeout", envOr("BENCH_DRAIN_TIMEOUT", "30m"), "longest wait for one relay to drain one backlog (BENCH_DRAIN_TIMEOUT)")
	parts := fs.String("partitions", envOr("BENCH_PARTITIONS", "6"), "partitions of every topic (walrelay's default) (BENCH_PARTITIONS)")
	status := fs.String("status-interval", envOr("BENCH_STATUS_INTERVAL", "1s"), "walrelay --status-interval and Debezium offset.flush.interval.ms (BENCH_STATUS_INTERVAL)")
	fs.BoolVar(&c.profile, "profile", envOr("BENCH_PROFILE", "") != "", "write walrelay CPU profiles of the W1 drains and of W2 next to the results (BENCH_PROFILE=1)")
	fs.StringVar(&c.outDir, "out", envOr("BENCH_OUT", "bench/results"), "results directory (BENCH_OUT)")
	fs.StringVar(&c.walrelayBin, "walrelay", envOr("BENCH_WALRELAY", ""), "walrelay binary (default: build ./cmd/walrelay) (BENCH_WALRELAY)")
	fs.StringVar(&c.walrelayBefore, "walrelay-before", envOr("BENCH_WALRELAY_BEFORE", ""), "a second walrelay binary (e.g. of the commit before a change): newtopic runs it alternately with the first; the relays walrelay-before and walrelay-null-before run it on W1 (BENCH_WALRELAY_BEFORE)")
	extraArgs := fs.String("walrelay-args", envOr("BENCH_WALRELAY_ARGS", ""), "more walrelay run flags, space-separated, for every walrelay relay (e.g. \"--kafka-linger 2ms\") (BENCH_WALRELAY_ARGS)")
	newTopics := fs.String("newtopics", envOr("BENCH_NEWTOPICS", "3"), "newtopic: new aggregate types (topics walrelay creates) per walrelay start (BENCH_NEWTOPICS)")
	newTopicRounds := fs.String("newtopic-rounds", envOr("BENCH_NEWTOPIC_ROUNDS", "2"), "newtopic: walrelay starts per binary (BENCH_NEWTOPIC_ROUNDS)")
	crashRate := fs.String("crash-rate", envOr("BENCH_CRASH_RATE", "1000"), "crash: single-row transactions per second (BENCH_CRASH_RATE)")
	crashEvery := fs.String("crash-every", envOr("BENCH_CRASH_EVERY", "15s"), "crash: streaming time between two kills (BENCH_CRASH_EVERY)")
	crashKills := fs.String("crash-kills", envOr("BENCH_CRASH_KILLS", "3"), "crash: kills per relay (BENCH_CRASH_KILLS)")
	startupRounds := fs.String("startup-rounds", envOr("BENCH_STARTUP_ROUNDS", "5"), "startup: measured starts of each kind (BENCH_STARTUP_ROUNDS)")
	fleetPipes := fs.String("fleet-pipelines", envOr("BENCH_FLEET_PIPELINES", "100"), "fleet: pipelines (databases) in one walrelay --config, capped at what the bed's PostgreSQL takes (BENCH_FLEET_PIPELINES)")
	fleetDrain := fs.String("fleet-drain", envOr("BENCH_FLEET_DRAIN", "10"), "fleet: pipelines draining a backlog at once, against as many pg_recvlogical (BENCH_FLEET_DRAIN)")
	fleetRounds := fs.String("fleet-drain-rounds", envOr("BENCH_FLEET_DRAIN_ROUNDS", "3"), "fleet: drain rounds, each a backlog drained by walrelay --config (and BENCH_WALRELAY_BEFORE's) and by pg_recvlogical, in an order that turns round each round (BENCH_FLEET_DRAIN_ROUNDS)")
	fleetBacklog := fs.String("fleet-backlog", envOr("BENCH_FLEET_BACKLOG", "50000"), "fleet: single-row transactions in each draining pipeline's backlog (BENCH_FLEET_BACKLOG)")
	fs.StringVar(&c.db, "db", envOr("BENCH_DB", "walrelay_bench"), "database to (re)create for the run (BENCH_DB)")
	fs.StringVar(&c.logLevel, "walrelay-log-level", envOr("BENCH_WALRELAY_LOG_LEVEL", "info"), "walrelay --log-level; debug logs every confirmation (BENCH_WALRELAY_LOG_LEVEL)")
	fs.BoolVar(&c.keepLogs, "keep-logs", envOr("BENCH_KEEP_LOGS", "") != "", "keep the relays' logs after a successful run (BENCH_KEEP_LOGS=1)")
	flag.Parse()
	var errs []string
	atoi := func(name, s string, min int) int {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < min {
			errs = append(errs, fmt.Sprintf("-%s %q: want an integer of at least %d", name, s, min))
		}
		return n
	}
	dur := func(name, s string) time.Duration {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			errs = append(errs, fmt.Sprintf("-%s %q: want a duration such as 60s", name, s))
		}
		return d
	}
	c.walrelayArgs = strings.Fields(*extraArgs)
	c.rows = atoi("rows", *rows, 1)
	c.batchTx = atoi("batch-tx", *batchTx, 1)
	c.batchRows = atoi("batch-rows", *batchRows, 1)
	c.aggregates = atoi("aggregates", *aggs, 1)
	c.fillConns = atoi("fill-conns", *fill, 1)
	c.partitions = atoi("partitions", *parts, 1)
	c.newTopics = atoi("newtopics", *newTopics, 1)
	c.newTopicRounds = atoi("newtopic-rounds", *newTopicRounds, 1)
	c.crashRate = atoi("crash-rate", *crashRate, 1)
	c.crashKills = atoi("crash-kills", *crashKills, 1)
	c.startupRounds = atoi("startup-rounds", *startupRounds, 1)
	c.fleetPipelines = atoi("fleet-pipelines", *fleetPipes, 2)
	c.fleetDrain = atoi("fleet-drain", *fleetDrain, 1)
	c.fleetBacklog = atoi("fleet-backlog", *fleetBacklog, 1)
	c.fleetDrainRounds = atoi("fleet-drain-rounds", *fleetRounds, 1)
	c.crashEvery = dur("crash-every", *crashEvery)
	c.w2Duration = dur("w2-duration", *w2d)
	c.w2Warmup = dur("w2-warmup", *w2w)
	c.drainTimeout = dur("drain-timeout", *drain)
	c.status = dur("status-interval", *status)
	for _, r := range strings.Split(*relays, ",") {
		switch r = strings.TrimSpace(r); r {
		case relayRecv, relayNull, relayWalrelay, relayEOS, relayNew, relayDebezium:
			c.relays = append(c.relays, r)
		case relayWalrelay + beforeSuffix, relayNull + beforeSuffix:
			if c.walrelayBefore == "" {
				errs = append(errs, fmt.Sprintf("-relays: %s needs -walrelay-before (BENCH_WALRELAY_BEFORE)", r))
			}
			c.relays = append(c.relays, r)
		case "":
		default:
			errs = append(errs, fmt.Sprintf("-relays: unknown relay %q (want %s, %s, %s, %s, %s, %s)", r, relayRecv, relayNull, relayWalrelay, relayEOS, relayNew, relayDebezium))
		}
	}
	for _, w := range strings.Split(*workloads, ",") {
		switch w = strings.TrimSpace(w); w {
		case "w1", "w1batch", "w2", "newtopic", "wmsg", "crash", "startup", "inbox", "tracing", "fleet":
			c.workloads = append(c.workloads, w)
		case "":
		default:
			errs = append(errs, fmt.Sprintf("-workloads: unknown workload %q (want w1, w1batch, w2, newtopic, wmsg, crash, startup, inbox, tracing, fleet)", w))
		}
	}
	for _, r := range strings.Split(*rates, ",") {
		if r = strings.TrimSpace(r); r != "" {
			c.w2Rates = append(c.w2Rates, atoi("w2-rates", r, 1))
		}
	}
	if c.status < 100*time.Millisecond {
		errs = append(errs, "-status-interval: want at least 100ms")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return c, nil
}

func (c *config) has(relay string) bool {
	for _, r := range c.relays {
		if r == relay {
			return true
		}
	}
	return false
}

func (c *config) runs(workload string) bool {
	for _, w := range c.workloads {
		if w == workload {
			return true
		}
	}
	return false
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() { os.Exit(run()) }

func run() int {
	cfg, err := parseConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	env, err := rig.FromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	b, err := newBench(ctx, cfg, env)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer b.close()
	if err := b.run(ctx); err != nil {
		logf("%v", err)
		b.res.Errors = append(b.res.Errors, err.Error())
	}
	path, err := b.write()
	if err != nil {
		logf("write results: %v", err)
		return 1
	}
	logf("raw results: %s", path)
	if len(b.res.Errors) > 0 {
		logf("finished with %d error(s); logs kept in %s", len(b.res.Errors), b.work)
		return 1
	}
	if !cfg.keepLogs {
		_ = os.RemoveAll(b.work)
	} else {
		logf("logs kept in %s", b.work)
	}
	return 0
}

// slotName is a relay's slot (and publication) for a workload.
func slotName(workload, relay string) string {
	return "bench_" + workload + "_" + strings.NewReplacer("-", "_").Replace(relay)
}

// topicPrefix is where a relay's records go: walrelay "wr.", Debezium "dbz.".
func topicPrefix(relay string) string {
	switch relay {
	case relayDebezium:
		return "dbz."
	case relayEOS:
		return "wreos."
	case relayNew:
		return "wrnew."
	case relayWalrelay + beforeSuffix:
		return "wrbefore."
	}
	return "wr."
}

func (b *bench) logDir(name string) string {
	d := filepath.Join(b.work, name)
	_ = os.MkdirAll(d, 0o755)
	return d
}
