package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/proc"
)

// running is a started relay.
type running struct {
	relay     string
	proc      *proc.Proc // walrelay, pg_recvlogical or the Connect JVM
	worker    *rig.ConnectWorker
	connector string
	t0        time.Time // the relay's start (Debezium: the connector's creation)
	metrics   string    // walrelay's /metrics URL, "" if it has none
	cpu0      float64   // the process's CPU seconds at t0
	lastCheck time.Time
}

func (b *bench) walrelayArgs(slot, pub string, null bool, profile string) []string {
	args := []string{
		"--pg-url", b.dsn,
		"--slot", slot,
		"--publication", pub,
		"--table", "public.outbox",
		"--brokers", strings.Join(b.env.Brokers, ","),
		"--topic", "wr.${aggregatetype}",
		"--header-columns", "type:eventType",
		"--topic-partitions", strconv.Itoa(b.cfg.partitions),
		"--status-interval", b.cfg.status.String(),
		"--log-level", b.cfg.logLevel,
	}
	args = append(args, b.cfg.walrelayArgs...)
	if null {
		args = append(args, "--bench-null-sink")
	}
	if profile != "" {
		args = append(args, "--cpu-profile", profile)
	}
	return args
}

// walrelayBin is the binary of a walrelay relay: BENCH_WALRELAY_BEFORE's
// for the -before relays, else -walrelay's.
func (b *bench) walrelayBin(relay string) string {
	if strings.HasSuffix(relay, beforeSuffix) {
		return b.cfg.walrelayBefore
	}
	return b.bin
}

func (b *bench) recvBin() string {
	if b.env.PGBinDir != "" {
		p := filepath.Join(b.env.PGBinDir, "pg_recvlogical")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "pg_recvlogical"
}

// recvArgs: pgoutput protocol 1 like walrelay, output thrown away, feedback
// every second, and an exit once the stream passes endpos.
func recvArgs(dsn, slot, pub string, endpos pglogrepl.LSN) []string {
	return []string{
		"-d", dsn, "--slot", slot, "--start",
		"-o", "proto_version=1", "-o", "publication_names=" + pub,
		"-f", "/dev/null", "-s", "1", "-F", "1", "--no-loop",
		"-E", endpos.String(),
	}
}

// startRelay starts relay on slot (whose publication has the same name).
// workerDir is Debezium's worker directory (its offsets file lives there).
func (b *bench) startRelay(ctx context.Context, relay, slot string, endpos pglogrepl.LSN, workerDir, profile string) (*running, error) {
	r := &running{relay: relay}
	var err error
	switch relay {
	case relayRecv:
		r.t0 = time.Now()
		r.proc, err = rig.StartProc(relayRecv, filepath.Join(b.logDir("logs"), slot+".log"), nil,
			append([]string{b.recvBin()}, recvArgs(b.dsn, slot, slot, endpos)...)...)
	case relayWalrelay, relayNull, relayEOS, relayNew, relayWalrelay + beforeSuffix, relayNull + beforeSuffix:
		bin := b.walrelayBin(relay)
		args := b.walrelayArgs(slot, slot, strings.TrimSuffix(relay, beforeSuffix) == relayNull, profile)
		if relay == relayWalrelay+beforeSuffix {
			args = append(args, "--topic", topicPrefix(relay)+"${aggregatetype}")
		}
		if relay == relayEOS {
			args = append(args, "--exactly-once", "--topic", topicPrefix(relay)+"${aggregatetype}", "--checkpoint-topic", "wreos.checkpoints")
		}
		if relay == relayNew {
			args = append(args, "--topic", topicPrefix(relay)+"${aggregatetype}")
		}
		if b.httpAddr {
			port, err := proc.FreePort()
			if err != nil {
				return nil, err
			}
			args = append(args, "--http-addr", "127.0.0.1:"+strconv.Itoa(port))
			r.metrics = "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
		}
		r.t0 = time.Now()
		r.proc, err = rig.StartWalrelay(bin, filepath.Join(b.logDir("logs"), slot+"-"+time.Now().Format("150405")+".log"), args...)
	case relayDebezium:
		r.worker, err = rig.StartConnect(ctx, b.libs, workerDir, b.env.Brokers, rig.DebeziumWorkerProps(b.cfg.status, 1048588))
		if err != nil {
			return nil, err
		}
		r.proc = r.worker.Proc
		r.connector = slot
		conf, err := b.debeziumConfig(slot)
		if err != nil {
			r.stop()
			return nil, err
		}
		r.cpu0 = r.proc.CPU()
		r.t0 = time.Now()
		if err := r.worker.CreateConnector(ctx, r.connector, conf); err != nil {
			r.stop()
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown relay %q", relay)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// debeziumConfig is the connector the benchmark runs. N.B. Debezium 3's
// four __debezium.context.* headers are off, so both relays produce the
// same record bytes (make compat reports them as a difference).
func (b *bench) debeziumConfig(slot string) (map[string]string, error) {
	conf, err := rig.DebeziumConnector(b.dsn, slot, slot, "dbz.${routedByValue}", b.cfg.status)
	if err != nil {
		return nil, err
	}
	conf["extended.headers.enabled"] = "false"
	return conf, nil
}

// check reports a relay that died or a Debezium task that failed (at most
// once a second).
func (r *running) check(ctx context.Context) error {
	if time.Since(r.lastCheck) < time.Second {
		return nil
	}
	r.lastCheck = time.Now()
	if r.proc.Exited() {
		if r.relay == relayRecv && r.proc.Err() == nil {
			return nil // it stops by itself at its end position
		}
		return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", r.relay, r.proc.Err(), r.proc.LogPath, r.proc.Tail(20))
	}
	if r.worker != nil {
		st, trace, err := r.worker.TaskState(ctx, r.connector)
		if err == nil && st == "FAILED" {
			if len(trace) > 3000 {
				trace = trace[:3000]
			}
			return fmt.Errorf("debezium task failed: %s", trace)
		}
	}
	return nil
}

// cpu is the relay's CPU seconds since t0.
func (r *running) cpu() float64 { return r.proc.CPU() - r.cpu0 }

// stop stops the relay gracefully.
func (r *running) stop() error {
	if r.worker != nil {
		return r.worker.Stop()
	}
	return r.proc.Stop(45 * time.Second)
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
