package testbed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/proc"
)

// The OpenTelemetry Collector of the tracing tests: tools/otelcol (a Go
// module of its own: the Collector's OTLP receiver and file exporter at
// one release), built once per source into
// ${XDG_CACHE_HOME:-$HOME/.cache}/walrelay/otelcol-HASH and started per
// test as a process on free ports, its spans written as OTLP JSON lines to
// a file the test reads back.

const collectorReadyWithin = 60 * time.Second

// Collector is a running OpenTelemetry Collector.
type Collector struct {
	// GRPC and HTTP are the OTLP receiver's addresses (host:port).
	GRPC, HTTP string
	// SpansPath is the file exporter's output.
	SpansPath string
	p         *proc.Proc
}

// StartCollector builds the Collector (the first time) and starts one for
// t, stopped when t ends. A Collector that cannot be built or started
// fails t.
func StartCollector(t testing.TB) *Collector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := RunCollector(ctx, dir, filepath.Join(dir, "spans.json"), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// RunCollector builds the Collector (the first time) and starts one in
// dir (its configuration and log) writing the spans it receives to
// spansPath (/dev/null: none kept), for a program outside a test (the
// benchmark); Stop ends it.
func RunCollector(ctx context.Context, dir, spansPath string, logf func(string, ...any)) (*Collector, error) {
	bin, err := collectorBinary(ctx, logf)
	if err != nil {
		return nil, err
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = proc.FreePort(); err != nil {
			return nil, err
		}
	}
	c := &Collector{
		GRPC:      fmt.Sprintf("127.0.0.1:%d", ports[0]),
		HTTP:      fmt.Sprintf("127.0.0.1:%d", ports[1]),
		SpansPath: spansPath,
	}
	// N.B. flush_interval: the file exporter buffers; a short one lets the
	// test read what was received without waiting long.
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, c.GRPC, c.HTTP, c.SpansPath)
	cfgPath := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	p, err := proc.Start(proc.Options{Name: "otelcol", Path: bin, Args: []string{"--config", cfgPath}, Dir: dir,
		Log: filepath.Join(dir, "otelcol.log"), Sample: true})
	if err != nil {
		return nil, err
	}
	c.p = p
	deadline := time.Now().Add(collectorReadyWithin)
	for !strings.Contains(p.Log(), "Everything is ready") {
		if p.Exited() {
			return nil, fmt.Errorf("otelcol exited during startup (%v):\n%s", p.Err(), p.Tail(40))
		}
		if time.Now().After(deadline) {
			_ = p.Stop(10 * time.Second)
			return nil, fmt.Errorf("otelcol not ready within %s:\n%s", collectorReadyWithin, p.Tail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c, nil
}

// Stop stops the Collector.
func (c *Collector) Stop() error { return c.p.Stop(10 * time.Second) }

// CPU is the Collector's CPU seconds so far.
func (c *Collector) CPU() float64 { return c.p.CPU() }

// Log is the Collector's log so far.
func (c *Collector) Log() string { return c.p.Log() }

// collectorBinary builds tools/otelcol into the cache, keyed by its
// sources, unless it is there.
func collectorBinary(ctx context.Context, logf func(string, ...any)) (string, error) {
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "tools", "otelcol")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("read the Collector's source: %w", err)
		}
		h.Write(b)
	}
	root, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: %w", err)
	}
	dir := filepath.Join(root, "walrelay", "otelcol-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, "otelcol")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// N.B. one build at a time: tests and packages start Collectors at once.
	release, err := proc.LockFile(filepath.Join(dir, "lock"), syscall.LOCK_EX)
	if err != nil {
		return "", err
	}
	defer release()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built while we waited
	}
	logf("testbed: building the OpenTelemetry Collector (tools/otelcol, about 2 minutes the first time)")
	tmp := bin + ".tmp" + randomHex(4)
	build := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	build.Dir = src
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	start := time.Now()
	if err := build.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build the OpenTelemetry Collector (cd tools/otelcol && go build): %w\n%s", err, out.String())
	}
	logf("testbed: built the OpenTelemetry Collector in %s", time.Since(start).Round(time.Second))
	return bin, os.Rename(tmp, bin)
}

// Span is one span the Collector received.
type Span struct {
	Service                 string // the resource's service.name
	Scope                   string
	TraceID, SpanID, Parent string // hex; Parent "" for a root span
	Name                    string
	Kind                    int // OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer
	Start, End              time.Time
	Attributes              map[string]string // every value as text
	StatusCode              int               // 0 unset, 1 ok, 2 error
	TraceState              string
	Flags                   uint32
}

// Spans reads every span the Collector has written so far.
func (c *Collector) Spans(t testing.TB) []Span {
	t.Helper()
	spans, err := readSpans(c.SpansPath)
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

// WaitSpans reads the spans until done says they are complete, failing t
// after timeout with what it has.
func (c *Collector) WaitSpans(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := c.Spans(t)
		if done(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Collector has %d spans after %s, not the ones awaited; its log:\n%s", len(spans), timeout, c.p.Tail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// otlpJSON is the part of OTLP's JSON encoding (the file exporter's
// output, one ExportTraceServiceRequest per line) the tests read.
type otlpJSON struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpAttr `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			Spans []struct {
				TraceID      string     `json:"traceId"`
				SpanID       string     `json:"spanId"`
				ParentSpanID string     `json:"parentSpanId"`
				TraceState   string     `json:"traceState"`
				Flags        uint32     `json:"flags"`
				Name         string     `json:"name"`
				Kind         int        `json:"kind"`
				Start        string     `json:"startTimeUnixNano"`
				End          string     `json:"endTimeUnixNano"`
				Attributes   []otlpAttr `json:"attributes"`
				Status       struct {
					Code int `json:"code"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpAttr struct {
	Key   string `json:"key"`
	Value struct {
		String *string  `json:"stringValue"`
		Int    *string  `json:"intValue"`
		Bool   *bool    `json:"boolValue"`
		Double *float64 `json:"doubleValue"`
	} `json:"value"`
}

func (a otlpAttr) text() string {
	switch v := a.Value; {
	case v.String != nil:
		return *v.String
	case v.Int != nil:
		return *v.Int
	case v.Bool != nil:
		return strconv.FormatBool(*v.Bool)
	case v.Double != nil:
		return strconv.FormatFloat(*v.Double, 'g', -1, 64)
	}
	return ""
}

func attrMap(as []otlpAttr) map[string]string {
	m := make(map[string]string, len(as))
	for _, a := range as {
		m[a.Key] = a.text()
	}
	return m
}

func unixNano(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n).UTC()
}

// readSpans parses the file exporter's output; a last line still being
// written is left for the next read.
func readSpans(path string) ([]Span, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var spans []Span
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req otlpJSON
		if err := json.Unmarshal(line, &req); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && bytes.HasSuffix(b, line) {
				break // the line being written
			}
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		for _, rs := range req.ResourceSpans {
			service := attrMap(rs.Resource.Attributes)["service.name"]
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans = append(spans, Span{
						Service: service, Scope: ss.Scope.Name,
						TraceID: s.TraceID, SpanID: s.SpanID, Parent: s.ParentSpanID,
						Name: s.Name, Kind: s.Kind, Start: unixNano(s.Start), End: unixNano(s.End),
						Attributes: attrMap(s.Attributes), StatusCode: s.Status.Code,
						TraceState: s.TraceState, Flags: s.Flags,
					})
				}
			}
		}
	}
	return spans, sc.Err()
}
