package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/bench/connect"
	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/testbed"
)

type bench struct {
	cfg       *config
	env       *rig.Env
	dsn       string // the benchmark's database
	work      string // logs, Connect worker directories
	bin       string // walrelay
	libs      string // Connect and Debezium jars
	adm       *rig.Admin
	res       *Results
	profiling bool
	httpAddr  bool // walrelay serves /metrics (--http-addr)
	busy0     rig.MachineCPU
	base      string // results path without extension: DIR/DATE-HOST
}

func newBench(ctx context.Context, cfg *config, env *rig.Env) (*bench, error) {
	b := &bench{cfg: cfg, env: env, res: &Results{Started: time.Now().Format(time.RFC3339)}}
	b.busy0 = rig.ReadMachineCPU()
	var err error
	if b.work, err = os.MkdirTemp("", "walrelay-bench-"); err != nil {
		return nil, err
	}
	if b.adm, err = rig.NewAdmin(env.Brokers); err != nil {
		return nil, err
	}
	b.res.Machine = machine(ctx, env)
	b.base = filepath.Join(cfg.outDir, time.Now().Format("2006-01-02")+"-"+b.res.Machine.Host)
	if _, err := os.Stat(b.base + ".json"); err == nil {
		b.base = filepath.Join(cfg.outDir, time.Now().Format("2006-01-02-150405")+"-"+b.res.Machine.Host)
	}
	if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
		return nil, err
	}
	logf("machine: %s, %d cores, load %s; work dir %s", b.res.Machine.CPUModel, b.res.Machine.NProc, b.res.Machine.LoadAtStart, b.work)

	if b.bin = cfg.walrelayBin; b.bin == "" {
		logf("building walrelay")
		if b.bin, err = rig.BuildWalrelay(ctx, b.work, "bench"); err != nil {
			return nil, err
		}
	}
	if cfg.has(relayNull) && !rig.HasFlag(b.bin, "bench-null-sink") {
		return nil, fmt.Errorf("relay %s: %s has no --bench-null-sink: build it with go build -tags bench ./cmd/walrelay (make bench does)", relayNull, b.bin)
	}
	inflight, err := rig.FlagDefault(b.bin, "max-inflight-bytes")
	if err != nil {
		return nil, err
	}
	if b.res.inflightBytes, err = strconv.Atoi(inflight); err != nil {
		return nil, fmt.Errorf("read the default of --max-inflight-bytes: %w", err)
	}
	b.profiling = cfg.profile && rig.HasFlag(b.bin, "cpu-profile")
	b.httpAddr = rig.HasFlag(b.bin, "http-addr")
	if cfg.profile && !b.profiling {
		logf("-profile: %s has no --cpu-profile flag; no profiles", b.bin)
	}
	if cfg.has(relayDebezium) {
		if b.libs, err = rig.ConnectJars(ctx, logf); err != nil {
			return nil, err
		}
	}

	logf("creating database %s", cfg.db)
	if b.dsn, err = testbed.FreshDatabase(ctx, env.PGURL, cfg.db); err != nil {
		return nil, err
	}
	// N.B. no autovacuum on the outbox: a vacuum of a million fresh rows
	// in the middle of a drain would compete for the two cores.
	if err := testbed.Exec(ctx, b.dsn, rig.OutboxDDL+`; ALTER TABLE outbox SET (autovacuum_enabled = false)`); err != nil {
		return nil, fmt.Errorf("create outbox: %w", err)
	}
	b.res.Config = Config{
		Rows: cfg.rows, BatchTx: cfg.batchTx, BatchRows: cfg.batchRows, Aggregates: cfg.aggregates,
		Partitions: cfg.partitions, W2Rates: cfg.w2Rates, W2Seconds: cfg.w2Duration.Seconds(),
		StatusInterval:   cfg.status.String(),
		WalrelayArgs:     b.walrelayArgs("SLOT", "PUB", false, ""),
		WalrelayInflight: strconv.Itoa(b.res.inflightBytes) + " (default of --max-inflight-bytes)",
		RecvArgs:         recvArgs("DSN", "SLOT", "PUB", 0),
		ConnectJVM:       rig.ConnectJVMOptions,
		ConnectWorker:    rig.DebeziumWorkerProps(cfg.status, 1048588),
		Notes: []string{
			"Kafka Connect " + connect.KafkaVersion + " runs Debezium " + connect.DebeziumVersion + ": on connect-runtime 4.4.0 the task fails (NoClassDefFoundError org.apache.kafka.common.utils.Sanitizer, moved in 4.4.0); the broker is Kafka 4.4.0.",
			"The test bed's broker runs with -XX:TieredStopAtLevel=1 (C1 only) and -Xmx768m; both relays share it.",
			"Debezium's drain and CPU are counted from the connector's creation on a worker that is already up; the worker's own start is reported separately.",
			"Every relay has its own slot and publication (FOR TABLE public.outbox WITH (publish = 'insert')), created before the backlog is written; relays drain one after the other, never at once.",
			"A drain ends when the slot's confirmed_flush_lsn reaches the LSN inside the backlog's final marker transaction (two rows), see rig.Marker.",
		},
	}
	if cfg.has(relayDebezium) {
		dc, _ := b.debeziumConfig("SLOT")
		dc["database.password"] = ""
		b.res.Config.DebeziumConfig = dc
	}
	return b, nil
}

func (b *bench) close() {
	if b.adm != nil {
		b.adm.Close()
	}
}

func (b *bench) run(ctx context.Context) error {
	var errs []error
	if b.cfg.runs("w1") || b.cfg.runs("w1batch") {
		if err := b.runW1(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("newtopic") {
		if err := b.runNewTopic(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("wmsg") {
		if err := b.runWMsg(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("startup") && b.cfg.has(relayWalrelay) {
		if err := b.runStartup(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("crash") {
		if err := b.runCrash(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("inbox") {
		if err := b.runInbox(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("tracing") {
		if err := b.runTracing(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("fleet") {
		if err := b.runFleet(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && b.cfg.runs("w2") {
		if err := b.runW2(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (b *bench) payloadSize(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var avg *float64
	err = conn.QueryRow(ctx, `SELECT avg(octet_length(payload::text))::float8 FROM (SELECT payload FROM outbox LIMIT 10000) s`).Scan(&avg)
	if avg != nil {
		b.res.Config.PayloadBytes = *avg
	}
	return err
}

// write saves the JSON and the markdown table and prints the table.
func (b *bench) write() (string, error) {
	b.res.Finished = time.Now().Format(time.RFC3339)
	b.res.Machine.LoadAtEnd = rig.LoadAvg()
	b.res.Machine.BusyShareRun = rig.BusyShare(b.busy0, rig.ReadMachineCPU())
	base := b.base
	js, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	md := markdown(b.res)
	fmt.Print(md)
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return "", err
	}
	return base + ".json", nil
}

func machine(ctx context.Context, env *rig.Env) Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAtStart: rig.LoadAvg(),
		PGVersion: env.PGVersion, KafkaVersion: env.KafkaVerion,
		ConnectVer: connect.KafkaVersion, DebeziumVer: connect.DebeziumVersion}
	m.Host, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				m.MemTotalMB = kb / 1024
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); err == nil {
		m.TCPCongestion = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "java", "-version").CombinedOutput(); err == nil {
		line, _, _ := strings.Cut(string(out), "\n")
		m.JavaVersion = strings.TrimSpace(line)
	}
	if out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output(); err == nil {
		m.WalrelayRev = strings.TrimSpace(string(out))
	}
	return m
}
