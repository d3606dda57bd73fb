package fleet

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/budget"
	"github.com/walrelay/walrelay/internal/httpserve"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pipeline"
	"github.com/walrelay/walrelay/replication"
)

// Exit codes, as walrelay run's (cmd/walrelay).
const (
	exitOK       = 0
	exitRuntime  = 1
	exitConfig   = 2
	exitSlotLost = 3
)

// Command is what `walrelay run --config FILE` gives the fleet.
type Command struct {
	// File is the pipeline file (--config).
	File string
	// Flags is the command line's flag set, parsed (with the environment)
	// and bound to the process's settings: the file's process-wide
	// settings are set on it, but those the command line gives.
	Flags *flag.FlagSet
	// Pipeline makes one pipeline's flag set and configuration.
	Pipeline NewPipeline
	// Settle is called once Flags holds the final process-wide settings:
	// the logger and the HTTP endpoints' settings they make.
	Settle func() (*zap.Logger, httpserve.Config, error)
	// Version is walrelay's, for the log and walrelay_build_info.
	Version string
	// Warnings are about the environment, logged at the start.
	Warnings []string
	// Signals: the first stops every pipeline gracefully, a second one
	// aborts.
	Signals <-chan os.Signal
	// Stderr gets the configuration's mistakes.
	Stderr io.Writer
}

// member is one pipeline.
type member struct {
	name string
	slot string
	// relay and metrics are the pipeline's; in a group, each assignment
	// here makes new ones (grouprun.go): read them with live.
	mu      sync.Mutex
	relay   *pipeline.Relay
	metrics *metrics.Metrics
	// owner is this replica's name while the group assigns the pipeline
	// here, "" when another replica runs it; "" outside a group.
	owner atomic.Pointer[string]
	log   *zap.Logger
	// stopped is the error the pipeline stopped on, nil while it runs.
	stopped atomic.Pointer[string]
	// code and err are how it stopped: set by its goroutine before it
	// reports on run's channel.
	code    int
	err     error
	rate    rate
	history history // the status page's chart
	db      string  // the database's name, for the status page
	grouped bool    // the fleet has a group: run only when assigned here
	used    bool    // relay has run (grouprun.go)
	// inflight is its account of the process's in-flight bound, nil
	// when there is none (budget.go).
	inflight *budget.Account
}

// live is m's relay and metrics.
func (m *member) live() (*pipeline.Relay, *metrics.Metrics) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.relay, m.metrics
}

// Main runs the pipelines of c.File until a signal or until every one has
// stopped, and returns the exit code: 0 after a signal, else the worst of
// the pipelines' (3 slot lost, 2 setup, 1 runtime); 2 for a file with
// mistakes, all of them printed to c.Stderr.
func Main(c Command) int {
	data, err := os.ReadFile(c.File)
	if err != nil {
		fmt.Fprintf(c.Stderr, "walrelay: --config: %v\n", err)
		return exitConfig
	}
	plans, ms := load(data, c.Flags, c.Pipeline)
	pool, bms := processInflight(data, c.Pipeline, plans) // budget.go
	if ms = append(ms, bms...); len(ms) > 0 {
		fmt.Fprintf(c.Stderr, "walrelay: invalid configuration in %s:\n%s", c.File, format(c.File, ms))
		return exitConfig
	}
	code := exitOK
	log, hc, err := c.Settle()
	if err != nil {
		fmt.Fprintf(c.Stderr, "walrelay: invalid configuration: %v\n", err)
		return exitConfig
	}
	defer log.Sync()
	log.Info("starting", zap.String("version", c.Version), zap.String("go", runtime.Version()), zap.String("config", c.File), zap.Int("pipelines", len(plans)))
	for _, w := range c.Warnings {
		log.Warn(w)
	}
	// N.B. the Kafka settings are process-wide: every pipeline has the
	// same warnings about them.
	for _, w := range plans[0].warnings {
		log.Warn(w)
	}
	f := &fleet{log: log, pool: pool}
	defer closeKafka(shareKafka(plans, log)) // kafka.go
	var limit int64
	group := groupOf(data)
	defer closeMarkers(shareMarkers(plans, group == "", log)) // markers.go
	for i := range plans {
		p := &plans[i] // N.B. its cfg as the group's later relays get it too
		mem := &member{name: p.name, slot: p.cfg.Replication.Slot, db: databaseName(p.cfg.Replication.ConnString), log: log.With(zap.String("pipeline", p.name)), grouped: group != ""}
		mem.inflight = inflightAccount(pool, &p.cfg) // budget.go
		mem.metrics = newMemberMetrics(mem, c.Version)
		p.cfg.Metrics = mem.metrics
		if mem.relay, err = pipeline.New(p.cfg, mem.log); err != nil {
			ms = append(ms, mistake{line: p.line, pipeline: p.name, msg: err.Error()})
		}
		f.members = append(f.members, mem)
		f.shutdown = max(f.shutdown, p.cfg.Replication.ShutdownTimeout)
		limit += p.cfg.MemoryLimit()
	}
	if len(ms) > 0 {
		fmt.Fprintf(c.Stderr, "walrelay: invalid configuration in %s:\n%s", c.File, format(c.File, ms))
		return exitConfig
	}
	// N.B. as pipeline.SetMemoryLimit, for the pipelines together: each
	// one's in-flight bound, replication buffer and headroom.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(processMemoryLimit(limit, plans, pool))
	}
	var g *groupRun
	if group != "" {
		if g, code = f.joinGroup(c, data, plans, group); g == nil {
			return code
		}
	}
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	if hc.Addr != "" {
		hc.Routes = map[string]http.Handler{"/pipelines": http.HandlerFunc(f.servePipelines), "/{$}": http.HandlerFunc(f.servePage),
			readyPipelinePath: http.HandlerFunc(f.serveReadyPipeline)}
		addr, err := httpserve.Serve(hctx, hc, gatherer{f.members}, f, log)
		if err != nil {
			log.Error("cannot serve http", zap.Error(err))
			return exitConfig
		}
		log.Info("serving /pipelines", zap.String("addr", addr))
	}
	go f.watchInflight(hctx) // budget.go
	if g != nil {
		return g.run(groupOpts(plans), c.Signals, f.sample)
	}
	return f.run(c.Signals)
}

// fleet is the running pipelines.
type fleet struct {
	log      *zap.Logger
	group    *groupRun    // nil: every pipeline runs here
	pool     *budget.Pool // the process's in-flight bound, nil: none (budget.go)
	members  []*member
	shutdown time.Duration // the longest of the pipelines' shutdown timeouts
}

// run runs every pipeline in its own goroutine until a signal (then it
// stops them all at once and returns 0) or until each has stopped (then
// it returns the worst exit code).
func (f *fleet) run(sigs <-chan os.Signal) int {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ended := make(chan *member, len(f.members))
	for _, m := range f.members {
		go func() {
			err := m.relay.Run(ctx)
			if ctx.Err() == nil {
				msg := "stopped"
				if err != nil {
					msg = err.Error()
				}
				m.stopped.Store(&msg)
				m.code = exitCode(err)
				m.err = err
			}
			ended <- m
		}()
	}
	samples := time.NewTicker(rateEvery)
	defer samples.Stop()
	f.sample()
	running, worst, stopping := len(f.members), exitOK, false
	var abortAt <-chan time.Time
	for running > 0 {
		select {
		case sig := <-sigs:
			if stopping {
				f.log.Warn("second signal: aborting")
				f.abort()
				continue
			}
			f.log.Info("stopping", zap.String("signal", sig.String()), zap.Int("pipelines", running))
			stopping = true
			stop()
			abortAt = time.After(f.shutdown + 5*time.Second)
		case <-abortAt:
			f.log.Warn("shutdown timeout passed: aborting")
			f.abort()
		case <-samples.C:
			f.sample()
		case m := <-ended:
			running--
			if stopping {
				continue
			}
			worst = max(worst, m.code)
			// N.B. logged once, here, with the pipeline's name; the
			// others go on.
			switch m.code {
			case exitSlotLost:
				m.log.Error("pipeline stopped: replication slot lost; the other pipelines go on", zap.Error(m.err), zap.Int("running", running))
			case exitConfig:
				m.log.Error("pipeline stopped: fix the setup and restart walrelay; the other pipelines go on", zap.Error(m.err), zap.Int("running", running))
			default:
				m.log.Error("pipeline stopped on error; the other pipelines go on", zap.Error(m.err), zap.Int("running", running))
			}
		}
	}
	if stopping {
		return exitOK
	}
	f.log.Error("every pipeline has stopped", zap.Int("exit_code", worst))
	return worst
}

// abort ends every pipeline's graceful stop at once.
func (f *fleet) abort() {
	for _, m := range f.members {
		m.relay.Abort()
	}
}

// exitCode maps a pipeline's final error as walrelay run does: 3 slot
// lost, 2 a setup a person must fix, 1 any other.
func exitCode(err error) int {
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return exitOK
	case errors.Is(err, replication.ErrSlotLost):
		return exitSlotLost
	case pipeline.IsSetupError(err):
		return exitConfig
	}
	return exitRuntime
}
