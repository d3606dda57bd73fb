package tracing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// TestEnabled: off unless an OTLP endpoint or exporter is configured, and
// OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turn it off.
func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(string) string
		want bool
	}{
		{"nothing", env(), false},
		{"endpoint", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), true},
		{"traces endpoint", env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), true},
		{"exporter otlp", env("OTEL_TRACES_EXPORTER", "otlp"), true},
		{"exporter none", env("OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "x"), false},
		{"sdk disabled", env("OTEL_SDK_DISABLED", "true", "OTEL_EXPORTER_OTLP_ENDPOINT", "x"), false},
		{"service name alone", env("OTEL_SERVICE_NAME", "relay"), false},
	} {
		if got := Enabled(tc.env); got != tc.want {
			t.Errorf("%s: Enabled %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCheckEnv: what walrelay cannot honour is refused, each named.
func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(string) string
		bad  string // "" : accepted
	}{
		{"defaults", env(), ""},
		{"grpc, ratio", env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_TRACES_SAMPLER", "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG", "0.1"), ""},
		{"http/json", env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"traces protocol wins", env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"zipkin", env("OTEL_TRACES_EXPORTER", "zipkin"), "OTEL_TRACES_EXPORTER"},
		{"sampler", env("OTEL_TRACES_SAMPLER", "jaeger_remote"), "OTEL_TRACES_SAMPLER"},
		{"ratio", env("OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "1.5"), "OTEL_TRACES_SAMPLER_ARG"},
	} {
		err := CheckEnv(tc.env)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.bad != "" && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.bad)
		}
	}
	if _, err := NewProvider(context.Background(), env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), "test", &Spans{}); !errors.Is(err, ErrConfig) {
		t.Errorf("NewProvider with http/json: %v", err)
	}
}

// TestBatchDefaults: walrelay's queue, batch and delay where OTEL_BSP_*
// leaves them unset; a variable set is the SDK's to read.
func TestBatchDefaults(t *testing.T) {
	for _, tc := range []struct {
		name         string
		getenv       func(string) string
		queue, batch int
		delay        time.Duration
	}{
		{"unset", env(), bspQueue, bspBatch, bspDelay},
		{"queue set", env("OTEL_BSP_MAX_QUEUE_SIZE", "100"), 0, 0, bspDelay},
		{"batch set", env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64"), bspQueue, 0, bspDelay},
		{"delay set", env("OTEL_BSP_SCHEDULE_DELAY", "100"), bspQueue, bspBatch, 0},
	} {
		var o sdktrace.BatchSpanProcessorOptions
		for _, opt := range batchDefaults(tc.getenv) {
			opt(&o)
		}
		if o.MaxQueueSize != tc.queue || o.MaxExportBatchSize != tc.batch || o.BatchTimeout != tc.delay {
			t.Errorf("%s: queue %d batch %d delay %s, want %d %d %s", tc.name, o.MaxQueueSize, o.MaxExportBatchSize, o.BatchTimeout, tc.queue, tc.batch, tc.delay)
		}
	}
}

// TestMemoryBytes: nothing when not exporting; the queue, walrelay's or
// OTEL_BSP_MAX_QUEUE_SIZE's, twice over otherwise.
func TestMemoryBytes(t *testing.T) {
	ep := "OTEL_EXPORTER_OTLP_ENDPOINT"
	for _, tc := range []struct {
		getenv func(string) string
		want   int64
	}{
		{env(), 0},
		{env(ep, "http://c:4318"), 2 * bspQueue * spanBytes},
		{env(ep, "http://c:4318", "OTEL_BSP_MAX_QUEUE_SIZE", "100"), 2 * 100 * spanBytes},
		{env(ep, "http://c:4318", "OTEL_TRACES_EXPORTER", "none"), 0},
	} {
		if got := MemoryBytes(tc.getenv); got != tc.want {
			t.Errorf("MemoryBytes = %d, want %d", got, tc.want)
		}
	}
}
