package sink

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/decode"
)

// Tracer carries events' trace contexts into their records (package
// tracing implements it). Deps.Tracer nil: no trace headers, no spans.
type Tracer interface {
	// Record is called as the record r of event ev (part of tx) is built,
	// its headers so far in hdrs; it returns hdrs with the trace headers
	// added, and may set r.Context to one that carries the event's span.
	Record(tx *decode.Tx, ev *decode.Event, r *kgo.Record, hdrs []kgo.RecordHeader) []kgo.RecordHeader
	// Acked is called for every record Record saw, when Kafka acknowledged
	// it (err nil), or it finally failed, or the attempt ended before it
	// was produced (err: why). Only the first of Acked and DeadLettered
	// for a record counts; later calls do nothing.
	Acked(r *kgo.Record, err error)
	// DeadLettered is called instead of Acked for a record Record saw
	// that is dead-lettered or parked (why) rather than produced.
	DeadLettered(r *kgo.Record, why error)
}

// N.B. every span Record starts must end, or it is never exported: the
// promise ends a record produced in a batch (txAcks.done), and these end
// the others (isolated, dead-lettered, parked, or the attempt ending
// before the record was produced).

// traceAcked ends the span of record r (nil: none): acknowledged when err
// is nil, else failed.
func (s *Sink) traceAcked(r *kgo.Record, err error) {
	if t := s.deps.Tracer; t != nil && r != nil {
		t.Acked(r, err)
	}
}

// traceDeadLettered ends the span of record r (nil: none), dead-lettered
// or parked (why).
func (s *Sink) traceDeadLettered(r *kgo.Record, why error) {
	if t := s.deps.Tracer; t != nil && r != nil {
		t.DeadLettered(r, why)
	}
}

// traceHeaders appends the W3C trace headers of src to dst: a dead
// letter keeps its record's context.
func traceHeaders(dst, src []kgo.RecordHeader) []kgo.RecordHeader {
	for _, h := range src {
		if h.Key == "traceparent" || h.Key == "tracestate" {
			dst = append(dst, h)
		}
	}
	return dst
}
