package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
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

// httpConfig is what the HTTP endpoints are told.
type httpConfig struct {
	addr        string        // --http-addr
	pprof       bool          // --http-pprof
	idleTimeout time.Duration // --http-idle-timeout
	maxConns    int           // --http-max-connections
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

// serveHTTP serves /metrics, /healthz and /readyz (and with pprof Go's
// profiling endpoints under /debug/pprof/) on cfg.addr until ctx ends. It
// returns the bound address (useful with port 0).
func serveHTTP(ctx context.Context, cfg httpConfig, m *metrics.Metrics, p probes, log *zap.Logger) (string, error) {
	addr, withPprof := cfg.addr, cfg.pprof
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--http-addr %s: %w", addr, err)
	}
	ln := newConnLimit(inner, cfg.maxConns)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
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
	if withPprof {
		// N.B. opt-in (--http-pprof): the endpoints show the program's
		// internals and a profile costs CPU while it runs.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
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
		IdleTimeout:       cfg.idleTimeout,
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

// connLimit is a listener that keeps at most max connections open. At the
// limit, accepting one more first closes the connection that has waited
// longest without a request in progress: idle between requests, or still
// sending its request's headers (a slow client). A connection serving a
// request is never closed; when all are, the new one is.
type connLimit struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[net.Conn]connInfo
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, max: max, conns: make(map[net.Conn]connInfo)}
}

// Accept returns the next connection, making room for it.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.conns) >= l.max {
			victim := l.waitingLongest()
			if victim == nil {
				l.mu.Unlock()
				c.Close()
				continue
			}
			// N.B. forgotten now, not when the server reports it closed:
			// its file descriptor is released at Close.
			delete(l.conns, victim)
			victim.Close()
		}
		l.conns[c] = connInfo{state: http.StateNew, since: time.Now()}
		l.mu.Unlock()
		return c, nil
	}
}

// waitingLongest is the idle connection idle the longest, else the new
// connection open the longest (no request read yet), else nil. Called
// with l.mu held.
func (l *connLimit) waitingLongest() net.Conn {
	var best net.Conn
	var bestInfo connInfo
	for c, ci := range l.conns {
		if ci.state != http.StateIdle && ci.state != http.StateNew {
			continue
		}
		better := best == nil ||
			ci.state == http.StateIdle && bestInfo.state == http.StateNew ||
			ci.state == bestInfo.state && ci.since.Before(bestInfo.since)
		if better {
			best, bestInfo = c, ci
		}
	}
	return best
}

// track is the server's ConnState hook.
func (l *connLimit) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	default:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{state: state, since: time.Now()}
		}
	}
}
