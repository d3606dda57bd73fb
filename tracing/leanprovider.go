package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is the tracer provider NewProvider returns: the SDK's, for any
// span started through it, and beside it the lean path of walrelay's own
// span per event (Relay, leanSpan): the same sampler object, the same ID
// generator, resource, scope and OTLP client, its own bounded queue and
// batches under the same OTEL_BSP_* settings and the same counts (Spans).
// ForceFlush and Shutdown cover both.
type Provider struct {
	*sdktrace.TracerProvider
	// lean exports walrelay's per-event spans; nil: they go through the
	// SDK (a span limit is configured: leanEligible).
	lean    *leanExporter
	sampler sdktrace.Sampler
	ids     sdktrace.IDGenerator
}

// ForceFlush exports the spans ended so far: the lean queue's, then the
// SDK's.
func (p *Provider) ForceFlush(ctx context.Context) error {
	var err error
	if p.lean != nil {
		err = p.lean.flush(ctx)
	}
	return errors.Join(err, p.TracerProvider.ForceFlush(ctx))
}

// Shutdown exports what is left in the lean queue, then shuts the SDK's
// provider down (its processor, exporter and the OTLP client).
func (p *Provider) Shutdown(ctx context.Context) error {
	var err error
	if p.lean != nil {
		err = p.lean.shutdown(ctx)
	}
	return errors.Join(err, p.TracerProvider.Shutdown(ctx))
}

// providerParts is what both paths share: built once by NewProvider (from
// the environment) or by a test.
type providerParts struct {
	res     *resource.Resource
	sampler sdktrace.Sampler
	ids     sdktrace.IDGenerator
}

// newProviderFrom returns the Provider over exp (walrelay's exporter and
// its OTLP client), counting its spans in spans, configured by getenv's
// OTEL_BSP_* and span limits.
func newProviderFrom(exp *exporter, parts providerParts, spans *Spans, getenv func(string) string) *Provider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans.batcher(exp, getenv)),
		sdktrace.WithResource(parts.res), sdktrace.WithSampler(parts.sampler), sdktrace.WithIDGenerator(parts.ids))
	p := &Provider{TracerProvider: tp, sampler: parts.sampler, ids: parts.ids}
	if leanEligible(getenv) {
		p.lean = newLeanExporter(exp.client, parts.res, spans, getenv)
	}
	return p
}

// leanEligible reports whether the lean path exports exactly what the
// SDK's span would: not when a span or attribute limit is configured
// (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and the others), which the SDK applies
// to a span's attributes and the lean path does not; walrelay's span then
// goes through the SDK.
func leanEligible(getenv func(string) string) bool {
	for _, k := range []string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT",
		"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"} {
		if strings.TrimSpace(getenv(k)) != "" {
			return false
		}
	}
	return true
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and its argument pick,
// read as the SDK reads them (sdktrace's samplerFromEnv; CheckEnv has
// refused what it would not accept): parentbased_always_on when unset. The
// provider is given it (WithSampler), so that the SDK's spans and the lean
// path ask the same object.
func samplerFromEnv(getenv func(string) string) sdktrace.Sampler {
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() sdktrace.Sampler {
		r := 1.0
		if arg != "" {
			if v, err := strconv.ParseFloat(arg, 64); err == nil && v >= 0 && v <= 1 {
				r = v
			}
		}
		return sdktrace.TraceIDRatioBased(r)
	}
	switch strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))) {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return ratio()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio())
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// randomIDs is the SDK's ID generation (its randomIDGenerator): random
// non-zero ids. Given to the provider too (WithIDGenerator), so that both
// paths take ids from one source.
type randomIDs struct{}

// NewSpanID returns a random non-zero span id.
func (randomIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// NewIDs returns a random non-zero trace id and span id.
func (r randomIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, r.NewSpanID(ctx, tid)
}
