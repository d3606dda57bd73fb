package main

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTraceOutcome: a record's trace headers against the row's context.
func TestTraceOutcome(t *testing.T) {
	col := "#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00\ntracestate=rojo=1\n"
	bad := "traceparent=00-not-a-trace-id-01\n"
	rec := func(kv ...string) *kgo.Record {
		r := &kgo.Record{}
		for i := 0; i < len(kv); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return r
	}
	for _, c := range []struct {
		r    *kgo.Record
		col  *string
		want string
	}{
		{rec("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "tracestate", "rojo=1"), &col, "the writer's trace, the writer's span id, the writer's flags, the writer's tracestate"},
		{rec("traceparent", "00-0af7651916cd43dd8448eb211c80319c-1a2d548615020703-01"), &col, "the writer's trace, a span id of its own, flags 01 (the writer's 00), no tracestate (the writer's rojo=1)"},
		{rec("traceparent", "00-4a90aee5945519817e78c44f7c1d8570-a32e651841284f01-03"), &bad, "a new trace, flags 03"},
		{rec("traceparent", "00-4a90aee5945519817e78c44f7c1d8570-a32e651841284f01-01"), &col, "another trace, flags 01, no tracestate (the writer's rojo=1)"},
		{rec("id", "x"), nil, "no trace headers"},
		{rec("traceparent", "garbage"), nil, `traceparent "garbage", not a version-00 value`},
	} {
		if got := traceOutcome(c.r, c.col); got != c.want {
			t.Errorf("%s: %q, want %q", headersString(c.r.Headers), got, c.want)
		}
	}
}

// TestNamesDeliberate: only Debezium's traceparent for a malformed context
// is a documented difference of names; the trace headers in another place
// are not (both write them before id).
func TestNamesDeliberate(t *testing.T) {
	w := []string{"id", "eventType", "traceparent"}
	for _, c := range []struct {
		a, b      []string
		malformed bool
		want      bool
	}{
		{w, []string{"traceparent", "id", "eventType"}, false, false},
		{[]string{"id", "eventType"}, []string{"traceparent", "id", "eventType"}, true, true},
		{[]string{"id", "eventType"}, []string{"traceparent", "id", "eventType"}, false, false},
		{w, []string{"eventType", "id", "traceparent"}, false, false},
		{w, []string{"traceparent", "tracestate", "id", "eventType"}, false, false},
	} {
		if got := namesDeliberate(c.a, c.b, c.malformed) != ""; got != c.want {
			t.Errorf("%v vs %v (malformed %v): documented %v, want %v", c.a, c.b, c.malformed, got, c.want)
		}
	}
}
