package main

import (
	"context"
	"io"
	"net/http"
	"testing"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/metrics"
)

type fixedProbes struct{ healthy, ready bool }

func (p fixedProbes) Healthy() (bool, string) { return p.healthy, "loops stopped" }
func (p fixedProbes) Ready() (bool, string)   { return p.ready, "not streaming" }

// TestHTTPEndpoints: the probes answer from the relay, and the profiling
// endpoints exist only with --http-pprof.
func TestHTTPEndpoints(t *testing.T) {
	get := func(t *testing.T, addr, path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, withPprof := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		addr, err := serveHTTP(ctx, "127.0.0.1:0", withPprof, metrics.New(), fixedProbes{healthy: true}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, addr, "/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("/healthz = %d %q, want 200 ok", code, body)
		}
		if code, body := get(t, addr, "/readyz"); code != 503 || body != "not streaming\n" {
			t.Errorf("/readyz = %d %q, want 503 not streaming", code, body)
		}
		want := 404
		if withPprof {
			want = 200
		}
		if code, _ := get(t, addr, "/debug/pprof/cmdline"); code != want {
			t.Errorf("pprof %v: /debug/pprof/cmdline = %d, want %d", withPprof, code, want)
		}
		cancel()
	}
}
