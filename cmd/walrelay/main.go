// Command walrelay streams committed outbox inserts from a PostgreSQL
// logical replication slot to Kafka.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/replication"
)

// Exit codes.
const (
	exitOK       = 0
	exitRuntime  = 1 // a failure while running
	exitConfig   = 2 // bad flags, or a PostgreSQL/Kafka setup a person must fix
	exitSlotLost = 3 // the slot was invalidated: events may have been lost
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCmd(args, stderr)
	case "check":
		return checkCmd(args, stdout, stderr)
	case "status":
		return statusCmd(args, stdout, stderr)
	case "setup":
		return setupCmd(args, stdout, stderr)
	case "health":
		return healthCmd(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "walrelay", version)
		return exitOK
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "walrelay: unknown command %q\n\n%s", cmd, usage)
	return exitConfig
}

var version = "dev"

const usage = `Usage: walrelay [command] [flags]

Commands:
  run      stream outbox inserts to Kafka (the default)
  check    check PostgreSQL and Kafka for everything run needs, without streaming
  status   show the slot: active, confirmed position, lag, wal_status
  setup    create (or --print) the role, publication and slot walrelay needs
  health   probe a running walrelay's /readyz (for container health checks)
  version  print the version
  help     print this text

Run 'walrelay run -h' for the flags.
`

func runCmd(args []string, stderr io.Writer) int {
	// Catch signals first, so that a stop during start-up is graceful too.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	c, code := parseCommand("run", args, stderr, nil, nil)
	if code >= 0 {
		return code
	}
	cfg, rc, dc, sc := c.cfg, c.rc, c.dc, c.sc
	log, err := newLogger(cfg.logLevel, cfg.logFormat, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitConfig
	}
	defer log.Sync()
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "walrelay: --cpu-profile: %v\n", err)
			return exitConfig
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "walrelay: --cpu-profile: %v\n", err)
			return exitConfig
		}
		defer pprof.StopCPUProfile()
	}

	setMemoryLimit(cfg, log)

	// The first SIGINT/SIGTERM stops gracefully; a second one, or the
	// shutdown timeout running out, aborts.
	ctx, abort := context.WithCancel(context.Background())
	defer abort()
	stop := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			log.Info("stopping", zap.String("signal", sig.String()))
			close(stop)
		case <-ctx.Done():
			return
		}
		select {
		case <-sigs:
			log.Warn("second signal: aborting")
		case <-time.After(cfg.shutdownTimeout + 5*time.Second):
			log.Warn("shutdown timeout passed: aborting")
		case <-ctx.Done():
		}
		abort()
	}()

	r := &relay{rc: rc, dc: dc, sc: sc, log: log, metrics: metrics.New(), lagWarnBytes: cfg.lagWarnBytes}
	r.register()
	if cfg.httpAddr != "" {
		if _, err := r.serveHTTP(ctx, cfg.httpAddr); err != nil {
			log.Error("cannot serve http", zap.Error(err))
			return exitConfig
		}
	}
	err = r.run(ctx, stop)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled):
		return exitOK
	case errors.Is(err, replication.ErrSlotLost):
		log.Error("replication slot lost", zap.Error(err))
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitSlotLost
	case isConfigError(err):
		log.Error("cannot run: fix the setup and start again", zap.Error(err))
		fmt.Fprintf(stderr, "walrelay: cannot run: %v\n", err)
		return exitConfig
	}
	log.Error("stopped on error", zap.Error(err))
	return exitRuntime
}

func indent(err error) string {
	out := ""
	for _, line := range splitLines(err.Error()) {
		out += "  - " + line + "\n"
	}
	return out
}

func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	return append(lines, s[start:])
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

// memoryHeadroom is the Go memory walrelay needs besides what
// --max-inflight-bytes and the replication buffer bound: the transaction
// part being produced (1 MiB), the produce request being written, clients,
// metrics, stacks, and room for the collector.
//
// N.B. the in-flight bytes count what records really hold (decode copies
// their bytes out of the replication message), so the live heap stays
// under this limit and the collector does not run back to back: with
// --max-inflight-bytes 4 MiB and Kafka throttled it ran as often as
// without a limit (TestMemoryBoundPerRowShape, GOMEMLIMIT=off to compare).
// Before, a record pointing into a 50 KB row held 50 KB for 1.4 KiB
// counted, the heap outgrew the limit and collections took 40-80% of the
// CPU.
const memoryHeadroom = 16 << 20

// setMemoryLimit gives the Go runtime a soft memory limit of what the
// in-flight bounds allow plus headroom, unless GOMEMLIMIT sets one. Without
// it the heap may grow to twice what is live before a collection, so a
// full in-flight window would cost twice its size.
func setMemoryLimit(cfg config, log *zap.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := int64(cfg.maxInflight) + replication.BufferBytes + memoryHeadroom
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", zap.Int64("bytes", limit))
}
