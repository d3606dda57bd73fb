package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/httpserve"
	"github.com/walrelay/walrelay/pipeline"
)

// config is everything `walrelay run` is told: the relay's settings
// (pipeline.Settings, the stages' included) and the command's own.
type config struct {
	pipeline.Settings
	http                httpserve.Config
	logLevel, logFormat string
	cpuProfile          string // bench build only (bench.go)
	fleetFile           string // run --config (package fleet)
	// securityWarnings are about what the settings leave unprotected
	// (Kafka SASL without TLS), for the commands that use Kafka to log.
	securityWarnings []string
}

// envPrefix + the flag name in upper case with '-' as '_' is each flag's
// environment variable: --pg-url is WALRELAY_PG_URL.
const envPrefix = "WALRELAY_"

func envName(flagName string) string { return cli.EnvName(envPrefix, flagName) }

// kit parses walrelay's flags: WALRELAY_* overlay, did-you-mean, and each
// command's help (printUsage).
var kit = cli.Kit{Program: "walrelay", EnvPrefix: envPrefix, Usage: printUsage}

// benchFlags adds the bench build's switches (bench.go); nil in the
// product's build, whose flag set has none.
var benchFlags func(fs *flag.FlagSet, cfg *config)

func newFlagSet(name string, cfg *config) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	fs.StringVar(&cfg.http.Addr, "http-addr", ":8080", "address serving /metrics, /healthz and /readyz (empty: none)")
	cli.DurationVar(fs, &cfg.http.IdleTimeout, "http-idle-timeout", 30*time.Second, "close an HTTP keep-alive connection after it has been idle this long (more than 0)")
	fs.IntVar(&cfg.http.MaxConns, "http-max-connections", 64, "most connections --http-addr keeps open; at the limit a new one closes the one idle (or sending its headers) the longest")
	cli.BoolVar(fs, &cfg.http.Pprof, "http-pprof", false, "also serve Go's profiling endpoints under /debug/pprof/ on --http-addr, e.g. go tool pprof http://HOST:8080/debug/pprof/profile?seconds=30 (they show the program's internals: keep the address private)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "json", "json or console")
	if name == "run" || name == "status" {
		fs.StringVar(&cfg.fleetFile, "config", "", "YAML file of many pipelines to run in this process (docs/fleet.md): each run flag by its name, process-wide at the top, the others under defaults: and each of pipelines:; no pipeline's flag may be given with it")
	}
	if name == "run" {
		fs.String("fleet-instance", "", "this replica's name in the group of --config's file (group:), its pipelines' owner in /pipelines and the status page (default: the host's name); only with --config")
	}
	if benchFlags != nil {
		benchFlags(fs, cfg)
	}
	return fs
}

// stages turns the flags into the relay's configuration, reporting every
// mistake at once.
func (c *config) stages() (pipeline.Config, error) {
	// N.B. the SASL password comes from the environment or a file, never
	// from a flag, so that it never shows in a process list.
	c.Kafka.Password = os.Getenv(envName("kafka-sasl-password"))
	pc, warnings, err := c.Config()
	c.securityWarnings = append(c.securityWarnings, warnings...)
	pc.Marker.Version = version
	errs := []error{err}
	if _, err := parseLevel(c.logLevel); err != nil {
		errs = append(errs, err)
	}
	if c.http.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--http-idle-timeout %s: want more than 0 (default 30s)", c.http.IdleTimeout))
	}
	if c.http.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("--http-max-connections %d: want at least 1 (default 64)", c.http.MaxConns))
	}
	if c.logFormat != "json" && c.logFormat != "console" {
		errs = append(errs, fmt.Errorf("--log-format %q: want json or console", c.logFormat))
	}
	return pc, errors.Join(errs...)
}
