package tracing

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/walrelay/walrelay/decode"
)

// seqIDs gives span ids 1, 2, 3, ... (an injected ID generator: two
// providers fed the same events give their spans the same ids).
type seqIDs struct{ n atomic.Uint64 }

func (s *seqIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], s.n.Add(1))
	return sid
}

func (s *seqIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	return trace.TraceID{0xff, 1}, s.NewSpanID(ctx, trace.TraceID{})
}

// choosySampler follows the parent (ParentBased(AlwaysSample)) but for
// trace ids whose last byte is 1 mod 4, which it samples with a tracestate
// entry of its own and an attribute, 2 mod 4, which it records without
// sampling, and 3 mod 4, which it drops.
type choosySampler struct{}

func (choosySampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	r := sdktrace.ParentBased(sdktrace.AlwaysSample()).ShouldSample(p)
	switch p.TraceID[15] % 4 {
	case 1:
		r.Tracestate, _ = r.Tracestate.Insert("wr", "s1")
		r.Attributes = []attribute.KeyValue{attribute.String("sampler.rule", "one"), attribute.Int("sampler.n", 1)}
	case 2:
		r.Decision = sdktrace.RecordOnly
	case 3:
		r.Decision = sdktrace.Drop
	}
	return r
}

func (choosySampler) Description() string { return "choosy" }

// TestLeanMatchesSDK: for the same events, the OTLP requests of the lean
// path (Provider: leanSpan, leanExporter) decode to exactly the spans the
// SDK's span (tracer.Start ... End through walrelay's exporter) sends,
// with the same ids (one injected ID generator each) and end times (one
// clock each): resource, scope, name, kind, times, parent, flags,
// tracestate (the writer's and the sampler's), the sampler's attributes,
// status, and the acknowledged, replayed, resent and dead-lettered
// variants, messages of one to three bytes of length; and every record
// gets the same headers. Spans the sampler
// records without sampling, or drops, are sent by neither.
func TestLeanMatchesSDK(t *testing.T) {
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "walrelay-test"), attribute.Int("n", 7))
	getenv := env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "7") // several requests
	var endAt time.Time                                  // the events' end time, both paths'
	newRelay := func(lean bool) (*Relay, func(context.Context) error) {
		exp, err := newExporter(context.Background(), otlptracehttp.NewClient(
			otlptracehttp.WithEndpointURL(capture(t, fmt.Sprint("lean-", lean)).URL), otlptracehttp.WithInsecure()))
		if err != nil {
			t.Fatal(err)
		}
		parts := providerParts{res: res, sampler: choosySampler{}, ids: &seqIDs{}}
		var p trace.TracerProvider
		var flush, shutdown func(context.Context) error
		if lean {
			lp := newProviderFrom(exp, parts, newSpans(), getenv)
			if lp.lean == nil {
				t.Fatal("no lean path")
			}
			p, flush, shutdown = lp, lp.ForceFlush, lp.Shutdown
		} else {
			sp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newSpans().batcher(exp, getenv)),
				sdktrace.WithResource(parts.res), sdktrace.WithSampler(parts.sampler), sdktrace.WithIDGenerator(parts.ids))
			p, flush, shutdown = sp, sp.ForceFlush, sp.Shutdown
		}
		valid, malformed := counters()
		rl := NewRelay(RelayConfig{Provider: p, Valid: valid, Malformed: malformed, Database: "shop", ParentBased: true})
		if (rl.lean != nil) != lean {
			t.Fatalf("lean %v: the relay's lean path is %v", lean, rl.lean != nil)
		}
		rl.clock = func() time.Time { return endAt }
		t.Cleanup(func() { _ = shutdown(context.Background()) })
		return rl, flush
	}
	sdkRelay, sdkFlush := newRelay(false)
	leanRelay, leanFlush := newRelay(true)

	longID := strings.Repeat("i", 200)
	var sampled int
	for i := range 60 {
		flags := "01"
		if i%10 == 9 {
			flags = "00" // unsampled writer: neither path starts a span
		}
		tc := fmt.Sprintf("traceparent=00-0af7651916cd43dd8448eb211c8031%02x-b7ad6b71692033%02x-%s", i, i+1, flags)
		if i%3 == 0 {
			tc += "\ntracestate=congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
		}
		if flags == "01" && i%4 == 0 || flags == "01" && i%4 == 1 {
			sampled++
		}
		commit := time.Unix(1765000100, int64(i)*1000) // before the relays started: replayed
		if i%2 == 1 {
			commit = time.Now().Add(time.Hour)
		}
		tx := &decode.Tx{Xid: uint32(700 + i), CommitLSN: pglogrepl.LSN(0x16B3748 + i), CommitTime: commit}
		ev := &decode.Event{ID: fmt.Appendf(nil, "ev-%d", i), Key: fmt.Appendf(nil, "order-%d", i), Table: "public.outbox", TraceContext: []byte(tc)}
		switch i % 7 {
		case 3:
			ev.Key = nil
		case 5:
			ev.ID = []byte(longID)
		}
		if i == 8 {
			// N.B. a span over 16 KiB, in a batch over 16 KiB: lengths
			// of three bytes.
			ev.Key = bytes.Repeat([]byte("k"), 20000)
		}
		endAt = time.Unix(1765000200, int64(i)*1000+7)
		var hdrs [2][]kgo.RecordHeader
		for j, rl := range []*Relay{sdkRelay, leanRelay} {
			r := &kgo.Record{Topic: "outbox.event.order", Value: bytes.Repeat([]byte("v"), i*5), Context: context.Background()}
			hdrs[j] = rl.Record(tx, ev, r, nil)
			r.Partition, r.Offset = int32(i%3), int64(1000*i)
			switch i % 5 {
			case 1:
				rl.Acked(r, errors.New("broker said no"))
			case 2:
				rl.DeadLettered(r, errors.New("record too large"))
				rl.Acked(r, nil) // ended already: left as it is
			default:
				rl.Acked(r, nil)
			}
		}
		if fmt.Sprint(hdrs[0]) != fmt.Sprint(hdrs[1]) {
			t.Errorf("event %d: headers\nSDK:  %q\nlean: %q", i, hdrs[0], hdrs[1])
		}
	}
	for _, f := range []func(context.Context) error{sdkFlush, leanFlush} {
		if err := f(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want, got := flatten(t, captured["lean-false"]), flatten(t, captured["lean-true"])
	if len(want) != sampled || len(got) != len(want) {
		t.Fatalf("%d events sampled; the SDK's path sent %d spans, the lean path %d", sampled, len(want), len(got))
	}
	for i := range want {
		if !proto.Equal(want[i], got[i]) {
			t.Fatalf("span %d differs:\nSDK:  %v\nlean: %v", i, want[i], got[i])
		}
	}
}
