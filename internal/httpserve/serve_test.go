package httpserve

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
		addr, err := Serve(ctx, Config{Addr: "127.0.0.1:0", Pprof: withPprof, IdleTimeout: time.Minute, MaxConns: 8}, metrics.New().Registry, fixedProbes{healthy: true}, zap.NewNop())
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
		if code, _ := get(t, addr, "/debug/pprof/symbol"); code != want {
			t.Errorf("pprof %v: /debug/pprof/symbol = %d, want %d", withPprof, code, want)
		}
		// N.B. never served: the command line may hold --pg-url's password.
		if code, _ := get(t, addr, "/debug/pprof/cmdline"); code != 404 {
			t.Errorf("pprof %v: /debug/pprof/cmdline = %d, want 404", withPprof, code)
		}
		cancel()
	}
}

// blockingCollector blocks every Collect until release is closed.
type blockingCollector struct {
	desc    *prometheus.Desc
	entered chan struct{}
	release chan struct{}
}

func (c blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c blockingCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case c.entered <- struct{}{}:
	default:
	}
	<-c.release
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// TestMetricsConcurrencyLimit: while metricsInFlight scrapes are being
// gathered, one more is answered 503 at once, and /readyz still answers.
func TestMetricsConcurrencyLimit(t *testing.T) {
	m := metrics.New()
	bc := blockingCollector{desc: prometheus.NewDesc("walrelay_test_blocking", "blocks", nil, nil),
		entered: make(chan struct{}, metricsInFlight), release: make(chan struct{})}
	m.Registry.MustRegister(bc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Serve(ctx, Config{Addr: "127.0.0.1:0", IdleTimeout: time.Minute, MaxConns: 64}, m.Registry, fixedProbes{healthy: true, ready: true}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	cl := http.Client{Timeout: 30 * time.Second}
	done := make(chan int, metricsInFlight)
	for range metricsInFlight {
		go func() {
			resp, err := cl.Get("http://" + addr + "/metrics")
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	for range metricsInFlight {
		<-bc.entered
	}
	// N.B. refused at once, not queued: well before promhttp's own
	// metricsTimeout would answer it.
	quick := http.Client{Timeout: metricsTimeout / 2}
	resp, err := quick.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %d while %d are in flight: %v, want 503 at once", metricsInFlight+1, metricsInFlight, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("scrape %d while %d are in flight: status %d, want 503", metricsInFlight+1, metricsInFlight, resp.StatusCode)
	}
	if resp, err := cl.Get("http://" + addr + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/readyz while scrapes are in flight: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	close(bc.release)
	for range metricsInFlight {
		if code := <-done; code != 200 {
			t.Errorf("a scrape within the limit: status %d, want 200", code)
		}
	}
}

// TestHeaderLimit: a request whose headers pass httpMaxHeaderBytes is
// refused (431) without being served.
func TestHeaderLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Serve(ctx, Config{Addr: "127.0.0.1:0", IdleTimeout: time.Minute, MaxConns: 8}, metrics.New().Registry, fixedProbes{healthy: true}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers: status %d, want 431", resp.StatusCode)
	}
}
