package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/metrics"
)

// probes are what /healthz and /readyz ask.
type probes interface {
	Healthy() (bool, string)
	Ready() (bool, string)
}

// serveHTTP serves /metrics, /healthz and /readyz (and with withPprof Go's
// profiling endpoints under /debug/pprof/) on addr until ctx ends. It
// returns the bound address (useful with port 0).
func serveHTTP(ctx context.Context, addr string, withPprof bool, m *metrics.Metrics, p probes, log *zap.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--http-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
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
	if withPprof {
		// N.B. opt-in (--http-pprof): the endpoints show the program's
		// internals and a profile costs CPU while it runs.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
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
