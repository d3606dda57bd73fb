package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walrelay/walrelay/fleet"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/httpserve"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pipeline"
	"github.com/walrelay/walrelay/replication"
)

// startProfile starts a CPU profile written to path and returns what stops
// it; only the bench build has it (bench.go).
var startProfile func(path string) (stop func(), err error)

// runCmd is `walrelay run`: parse the configuration, build the logger, the
// metrics, the relay and its HTTP endpoints, run, and map the relay's error
// to an exit code.
func runCmd(args []string, stderr io.Writer) int {
	// Catch signals first, so that a stop during start-up is graceful too.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var top *flag.FlagSet
	c, code := parseCommand("run", args, stderr, func(fs *flag.FlagSet) { top = fs }, func() bool { return top.Lookup("config").Value.String() != "" })
	if code >= 0 {
		return code
	}
	if c.cfg.cpuProfile != "" {
		stop, err := startProfile(c.cfg.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "walrelay: --cpu-profile: %v\n", err)
			return exitConfig
		}
		defer stop()
	}
	if c.cfg.fleetFile != "" {
		return fleet.Main(fleet.Command{File: c.cfg.fleetFile, Flags: top, Pipeline: pipelineFlags, Version: cli.BuildVersion(version), Warnings: c.warnings, Signals: sigs, Stderr: stderr,
			Settle: func() (*zap.Logger, httpserve.Config, error) {
				log, err := newLogger(c.cfg.logLevel, c.cfg.logFormat, stderr)
				return log, c.cfg.http, err
			}})
	}
	if top.Lookup("fleet-instance").Value.String() != "" {
		fmt.Fprintln(stderr, "walrelay: --fleet-instance names a replica of a fleet's group: give it with --config FILE (docs/fleet.md), or drop it")
		return exitConfig
	}
	cfg := c.cfg
	log := c.log
	defer log.Sync()
	log.Info("starting", zap.String("version", cli.BuildVersion(version)), zap.String("go", runtime.Version()))
	for _, w := range c.warnings {
		log.Warn(w)
	}
	// N.B. PostgreSQL's TLS is logged (and warned about) by the
	// replication stage's "PostgreSQL TLS" step, with the live connections.
	for _, w := range cfg.securityWarnings {
		log.Warn(w)
	}

	m := metrics.New()
	m.SetBuildInfo(cli.BuildVersion(version), runtime.Version())
	pc := c.pc
	pc.Metrics = m
	relay, err := pipeline.New(pc, log)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", cli.Indent(err))
		return exitConfig
	}
	pipeline.SetMemoryLimit(pc, log)

	// The first SIGINT/SIGTERM stops gracefully; a second one, or the
	// shutdown timeout running out, aborts.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			log.Info("stopping", zap.String("signal", sig.String()))
			stop()
		case <-done:
			return
		}
		select {
		case <-sigs:
			log.Warn("second signal: aborting")
		case <-time.After(c.pc.Replication.ShutdownTimeout + 5*time.Second):
			log.Warn("shutdown timeout passed: aborting")
		case <-done:
		}
		relay.Abort()
	}()

	// N.B. the endpoints serve until walrelay exits, through the graceful
	// stop: /readyz says not ready while it drains.
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	if cfg.http.Addr != "" {
		cfg.http.Routes = map[string]http.Handler{"/{$}": fleet.SinglePage(hctx, relay, m, pc.Replication.Slot, pc.Replication.ConnString)}
		if _, err := httpserve.Serve(hctx, cfg.http, m.Registry, relay, log); err != nil {
			log.Error("cannot serve http", zap.Error(err))
			return exitConfig
		}
	}
	err = relay.Run(ctx)
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return exitOK
	case errors.Is(err, replication.ErrSlotLost):
		log.Error("replication slot lost", zap.Error(err))
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitSlotLost
	case pipeline.IsSetupError(err):
		log.Error("cannot run: fix the setup and start again", zap.Error(err))
		fmt.Fprintf(stderr, "walrelay: cannot run: %v\n", err)
		return exitConfig
	}
	log.Error("stopped on error", zap.Error(err))
	return exitRuntime
}

// pipelineFlags is fleet.NewPipeline: one pipeline's run flags and configuration.
func pipelineFlags() (*flag.FlagSet, func() (pipeline.Config, []string, error)) {
	var c config
	return newFlagSet("run", &c), func() (pipeline.Config, []string, error) { pc, err := c.stages(); return pc, c.securityWarnings, err }
}

// connectFailed reports a failed PostgreSQL connection of a sub-command:
// exit 2 with the setting to fix when the server refused the login or the
// database (pipeline.RefusalHint), else 1.
func connectFailed(stderr io.Writer, err error, connString string) int {
	if hint, ok := pipeline.RefusalHint(err, connString); ok {
		fmt.Fprintf(stderr, "walrelay: connect to postgresql: %v: %s\n", err, hint)
		return exitConfig
	}
	fmt.Fprintf(stderr, "walrelay: connect to postgresql: %v\n", err)
	return exitRuntime
}

func parseLevel(s string) (zapcore.Level, error) {
	var l zapcore.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func newLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	// N.B. durations as Go writes them ("30s", "1m0s"), never as a bare
	// number whose unit a reader must guess.
	ec.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	if format == "console" {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.AddSync(w), lvl)
	return zap.New(core).Named("walrelay"), nil
}

// recoverCmd is `walrelay recover` (docs/recovery.md).
func recoverCmd(args []string, stdout, stderr io.Writer) int {
	c, code := parseCommand("recover", args, stderr, nil, nil)
	if code < 0 {
		code = pipeline.Recover(c.pc, stdout, stderr, c.log)
	}
	return code
}
