package tracing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ErrConfig marks an OTEL_* setting walrelay cannot use: a configuration
// error (exit 2).
var ErrConfig = errors.New("tracing configuration")

// Enabled reports whether the environment (getenv) asks for span export:
// an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER=otlp, and
// neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// CheckEnv reports every OTEL_* setting walrelay cannot honour, so that the
// relay refuses it at start rather than exporting something else.
func CheckEnv(getenv func(string) string) error {
	var errs []error
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" && e != "none" {
		errs = append(errs, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: walrelay exports spans over OTLP only; set otlp or none", ErrConfig, e))
	}
	if _, err := protocol(getenv); err != nil {
		errs = append(errs, err)
	}
	switch s := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))); s {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
	case "traceidratio", "parentbased_traceidratio":
		if a := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); a != "" {
			if r, err := strconv.ParseFloat(a, 64); err != nil || r < 0 || r > 1 {
				errs = append(errs, fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", ErrConfig, a))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("%w: OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio", ErrConfig, s))
	}
	return errors.Join(errs...)
}

// ParentBased reports whether the sampler OTEL_TRACES_SAMPLER picks
// follows the parent's decision (parentbased_*, the default): an event
// whose writer did not sample it then needs no span at all.
func ParentBased(getenv func(string) string) bool {
	s := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	return s == "" || strings.HasPrefix(s, "parentbased_")
}

// Drops is the decision the sampler OTEL_TRACES_SAMPLER picks makes
// whatever the parent: for always_off and traceidratio (not parent-based),
// whether it drops a span of trace id; nil for the samplers that follow
// the parent (ParentBased: an event's context decides) and always_on. The
// relay asks it before it starts a span, so that an event the sampler
// drops costs no span (a span started only to be dropped was 0.9 µs and
// seven allocations an event: BenchmarkRelay/exporting-unsampled-ratio0).
// N.B. the same decision as the SDK's: traceidratio's is a function of the
// trace id alone, with the same ratio (checked by CheckEnv).
func Drops(getenv func(string) string) func(trace.TraceID) bool {
	switch strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))) {
	case "always_off":
		return func(trace.TraceID) bool { return true }
	case "traceidratio":
		ratio := 1.0 // the specification's default
		if a := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); a != "" {
			if r, err := strconv.ParseFloat(a, 64); err == nil && r >= 0 && r <= 1 {
				ratio = r
			}
		}
		s := sdktrace.TraceIDRatioBased(ratio)
		return func(id trace.TraceID) bool {
			return s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id}).Decision == sdktrace.Drop
		}
	}
	return nil
}

// protocol is the OTLP transport the environment picks:
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf (the specification's default).
func protocol(getenv func(string) string) (string, error) {
	p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if p == "" {
		p, name = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	switch p {
	case "":
		return "http/protobuf", nil
	case "grpc", "http/protobuf":
		return p, nil
	}
	return "", fmt.Errorf("%w: %s=%q: want grpc or http/protobuf (http/json is not supported)", ErrConfig, name, p)
}

// NewProvider builds the tracer provider the environment configures: an
// OTLP exporter (gRPC or HTTP; endpoint, headers, TLS certificates,
// compression and timeout from OTEL_EXPORTER_OTLP_*, as the exporters read
// them) behind a batch span processor (OTEL_BSP_*), the sampler of
// OTEL_TRACES_SAMPLER (default parentbased_always_on: the writer's
// decision is honoured), and a resource with service.name "walrelay"
// unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
// spans counts what becomes of the spans. Call it only when Enabled;
// Shutdown flushes the spans. walrelay's own span per event takes the lean
// path beside the SDK (Provider).
func NewProvider(ctx context.Context, getenv func(string) string, version string, spans *Spans) (*Provider, error) {
	if err := CheckEnv(getenv); err != nil {
		return nil, err
	}
	p, _ := protocol(getenv)
	// N.B. the OTLP exporters' clients, configured from the environment
	// as the exporters are, under walrelay's encoding (exporter).
	client := otlptracehttp.NewClient()
	if p == "grpc" {
		client = otlptracegrpc.NewClient()
	}
	exp, err := newExporter(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("%w: create OTLP exporter (%s): %w", ErrConfig, p, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "walrelay"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		// N.B. last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
		// override walrelay's own defaults.
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: read OTEL_RESOURCE_ATTRIBUTES: %w", ErrConfig, err)
	}
	// N.B. the sampler OTEL_TRACES_SAMPLER and its argument (checked
	// above) pick, parentbased_always_on without them, as the SDK reads
	// them: one object for the SDK's spans and the lean path's.
	return newProviderFrom(exp, providerParts{res: res, sampler: samplerFromEnv(getenv), ids: randomIDs{}}, spans, getenv), nil
}

// walrelay's batch span processor defaults, where the OTEL_BSP_* variable
// is not set: a span per event at tens of thousands of events a second
// overflows the SDK's queue of 2,048 (its spans dropped) between exports
// of 512; and a span waits at most a second to be exported, not five (a
// kill -9 loses what waits). MemoryBytes counts the queue.
//
// N.B. a queue of 8,192 dropped 12-16 % of the spans of a 50,000-event
// drain at 100 % sampling (the Collector on the same two cores), 32,768
// none; both drop in a longer drain that outruns the exports (35 % and
// 27 % of 100,000): walrelay_trace_spans_total counts them.
const (
	bspQueue = 32768
	bspBatch = 2048
	bspDelay = time.Second
)

// spanBytes is the Go memory a sampled span holds from its end to its
// export: its snapshot and attributes, about 1.5 KB, and its share of the
// OTLP request (BenchmarkRelay allocates 2.8 KB a span, 4.8 KB with the
// OTLP/HTTP exporter).
const spanBytes = 2 << 10

// MemoryBytes is the Go memory span export may hold when the environment
// configures it (Enabled; else 0): the batch span processor's queue full,
// and as much again for the batch being exported and its encoding. The
// relay's soft memory limit must count it: without it the collector ran
// back to back at 100 % sampling (a drain at 50 µs of CPU an event, 12 µs
// with GOMEMLIMIT=off).
func MemoryBytes(getenv func(string) string) int64 {
	if !Enabled(getenv) {
		return 0
	}
	queue := bspQueue
	if v, err := strconv.Atoi(strings.TrimSpace(getenv("OTEL_BSP_MAX_QUEUE_SIZE"))); err == nil && v > 0 {
		queue = v
	}
	return 2 * int64(queue) * spanBytes
}

// batchDefaults are the batch span processor's options for the OTEL_BSP_*
// variables that are not set (the SDK reads those that are).
func batchDefaults(getenv func(string) string) []sdktrace.BatchSpanProcessorOption {
	var opts []sdktrace.BatchSpanProcessorOption
	queue := getenv("OTEL_BSP_MAX_QUEUE_SIZE") == ""
	if queue {
		opts = append(opts, sdktrace.WithMaxQueueSize(bspQueue))
	}
	// N.B. the SDK caps a batch at the queue's size: a queue set smaller
	// keeps its own batch.
	if queue && getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") == "" {
		opts = append(opts, sdktrace.WithMaxExportBatchSize(bspBatch))
	}
	if getenv("OTEL_BSP_SCHEDULE_DELAY") == "" {
		opts = append(opts, sdktrace.WithBatchTimeout(bspDelay))
	}
	return opts
}
