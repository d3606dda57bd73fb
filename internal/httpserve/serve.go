package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Probes are what /healthz and /readyz ask.
type Probes interface {
	Healthy() (bool, string)
	Ready() (bool, string)
}

// Config is what the HTTP endpoints are told.
type Config struct {
	Addr        string        // --http-addr
	Pprof       bool          // --http-pprof
	IdleTimeout time.Duration // --http-idle-timeout
	MaxConns    int           // --http-max-connections
	// Routes are more paths served beside the probes (a fleet's
	// /pipelines); nil: none.
	Routes map[string]http.Handler
}

// Limits of the HTTP server, which serves small GET requests only.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 15 * time.Second
	// With --http-pprof: a CPU profile or trace writes for as long as it
	// was asked to run (seconds=30 by default), and pprof refuses one
	// that would outlast the write timeout.
	httpPprofWriteTimeout = 2 * time.Minute
	httpMaxHeaderBytes    = 8 << 10
	// metricsInFlight scrapes are served at once; one more is answered
	// 503 at once rather than queued (a scrape gathers every metric).
	metricsInFlight = 4
	metricsTimeout  = 10 * time.Second
)

// Serve serves /metrics (what g gathers), /healthz and /readyz (and with
// pprof Go's profiling endpoints under /debug/pprof/) on cfg.Addr until ctx
// ends. It returns the bound address (useful with port 0).
func Serve(ctx context.Context, cfg Config, g prometheus.Gatherer, p Probes, log *zap.Logger) (string, error) {
	addr, withPprof := cfg.Addr, cfg.Pprof
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--http-addr %s: %w", addr, err)
	}
	ln := newConnLimit(inner, cfg.MaxConns)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		MaxRequestsInFlight: metricsInFlight,
		Timeout:             metricsTimeout,
	}))
	probe := func(f func() (bool, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if ok, why := f(); !ok {
				http.Error(w, why, http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		}
	}
	mux.HandleFunc("/healthz", probe(p.Healthy))
	mux.HandleFunc("/readyz", probe(p.Ready))
	for path, h := range cfg.Routes {
		mux.Handle(path, h)
	}
	if withPprof {
		// N.B. opt-in (--http-pprof): the endpoints show the program's
		// internals and a profile costs CPU while it runs.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		// N.B. no /debug/pprof/cmdline: it returns the command line, and
		// a --pg-url there holds PostgreSQL's password.
		mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// N.B. every connection is bounded in time (the timeouts) and in
	// number (ln): an idle keep-alive or a slow client cannot hold one
	// for ever, nor many of them exhaust walrelay's file descriptors.
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ConnState:         ln.track,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	if withPprof {
		srv.WriteTimeout = httpPprofWriteTimeout
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", zap.Error(err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	bound := ln.Addr().String()
	paths := "/metrics, /healthz and /readyz"
	if withPprof {
		paths = "/metrics, /healthz, /readyz and /debug/pprof/"
	}
	log.Info("serving "+paths, zap.String("addr", bound))
	return bound, nil
}
