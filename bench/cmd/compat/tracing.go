package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/bench/internal/rig"
)

// The tracing configuration: Debezium's router with
// tracing.span.context.field on a Connect worker whose classpath has
// OpenTelemetry's SDK (rig.ConnectOTelJars, rig.ConnectOTelProps), and
// walrelay from import-debezium of the same file, over rows with a
// context (sampled, unsampled, with a tracestate), without one, and with
// a malformed or empty one.

const (
	tracedTable  = "outbox_traced"
	traceColumn  = "tracingspancontext"
	traceparentH = "traceparent"
	tracestateH  = "tracestate"
)

// traceRows are the writers' contexts, as the Quarkus outbox extension
// writes them (java.util.Properties text), and NULL.
func traceRows() []ins {
	ctx := func(s string) string { return `'{"t": 1}', '` + strings.ReplaceAll(s, "'", "''") + `'` }
	t := tracedTable
	return []ins{
		{"context, sampled", t, "Order", "order-1", "OrderCreated", ctx("#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-6683a80fde59cd687115e01830f501ae-90854263231ccb9c-01\n")},
		{"context, unsampled", t, "Order", "order-2", "OrderCreated", ctx("#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00\n")},
		{"context with a tracestate", t, "Customer", "cust-1", "CustomerCreated", ctx("traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\ntracestate=rojo=00f067aa0ba902b7\n")},
		{"no context (NULL)", t, "Order", "order-3", "OrderCreated", `'{"t": 2}', NULL`},
		{"malformed context", t, "Order", "order-4", "OrderCreated", ctx("traceparent=00-not-a-trace-id-01\n")},
		{"empty context", t, "Customer", "cust-2", "CustomerCreated", ctx("")},
	}
}

// writerTrace is what the row's column says, read here independently of
// walrelay: the traceparent property's trace id, span id and flags, and
// the tracestate property; ok false for none that is well-formed.
func writerTrace(col *string) (trace, span, flags, state string, ok bool) {
	if col == nil {
		return "", "", "", "", false
	}
	for _, line := range strings.Split(*col, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case traceparentH:
			trace, span, flags, ok = splitTraceparent(v)
		case tracestateH:
			state = v
		}
	}
	return trace, span, flags, state, ok
}

// splitTraceparent splits a version-00 traceparent header value.
func splitTraceparent(v string) (trace, span, flags string, ok bool) {
	p := strings.Split(v, "-")
	if len(p) != 4 || p[0] != "00" || len(p[1]) != 32 || len(p[2]) != 16 || len(p[3]) != 2 || !isHex(p[1]+p[2]+p[3]) {
		return "", "", "", false
	}
	return p[1], p[2], p[3], true
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// traceOutcome says what a record's trace headers are against the row's
// context: none; the writer's trace or a new one; the writer's span or
// one of the relay's own; the writer's sampled flag or another; the
// writer's tracestate, none, or another.
func traceOutcome(r *kgo.Record, col *string) string {
	tp, ok := header(r, traceparentH)
	if !ok {
		if _, ok := header(r, tracestateH); ok {
			return "a tracestate without a traceparent"
		}
		return "no trace headers"
	}
	trace, span, flags, ok := splitTraceparent(tp)
	if !ok {
		return fmt.Sprintf("traceparent %q, not a version-00 value", tp)
	}
	wTrace, wSpan, wFlags, wState, wOK := writerTrace(col)
	var parts []string
	switch {
	case !wOK:
		parts = append(parts, "a new trace, flags "+flags)
	case trace != wTrace:
		parts = append(parts, "another trace, flags "+flags)
	default:
		parts = append(parts, "the writer's trace")
		if span == wSpan {
			parts = append(parts, "the writer's span id")
		} else {
			parts = append(parts, "a span id of its own")
		}
		if flags == wFlags {
			parts = append(parts, "the writer's flags")
		} else {
			parts = append(parts, "flags "+flags+" (the writer's "+wFlags+")")
		}
	}
	ts, hasTS := header(r, tracestateH)
	switch {
	case !hasTS && wState == "":
	case !hasTS:
		parts = append(parts, "no tracestate (the writer's "+wState+")")
	case ts == wState:
		parts = append(parts, "the writer's tracestate")
	default:
		parts = append(parts, fmt.Sprintf("tracestate %q (the writer's %q)", ts, wState))
	}
	return strings.Join(parts, ", ")
}

// headerNames are the names of a record's headers after Debezium's
// leading context headers, in order.
func headerNames(r *kgo.Record) []string {
	hs, _ := splitContext(r.Headers)
	var names []string
	for _, h := range hs {
		names = append(names, h.Key)
	}
	return names
}

// withoutTrace is recs with their trace headers removed (copies), for the
// byte comparison of the rest; compareTrace compares the trace headers.
func withoutTrace(recs []*kgo.Record) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		c := *r
		c.Headers = nil
		for _, h := range r.Headers {
			if h.Key != traceparentH && h.Key != tracestateH {
				c.Headers = append(c.Headers, h)
			}
		}
		out[i] = &c
	}
	return out
}

// traceDeliberate explains the trace differences that are by design
// (docs/tracing.md, Compared with Debezium), by field and kind.
var traceDeliberate = map[string]string{
	"trace span id\x00walrelay the writer's span id, debezium a span id of its own": "walrelay without OTEL_* exports no span and copies the writer's traceparent as written; Debezium with the SDK on its classpath always starts db-log-write, the parent in its traceparent (docs/tracing.md, Compared with Debezium)",
	"trace malformed\x00walrelay no trace headers, debezium a new trace, flags 03":  "a context that holds no valid traceparent: walrelay relays the event without a parent and without trace headers (counted as malformed); Debezium's SDK starts db-log-write as the root of a new trace (sampled, random trace id flag) and writes its traceparent (docs/tracing.md, Compared with Debezium)",
}

// namesDeliberate explains a difference in the trace headers' names: the
// traceparent Debezium writes for a malformed context; "" for any other
// (both write them before id and eventType, docs/tracing.md).
func namesDeliberate(a, b []string, malformed bool) string {
	strip := func(ns []string) []string {
		return slices.DeleteFunc(slices.Clone(ns), func(n string) bool { return n == traceparentH || n == tracestateH })
	}
	if !slices.Equal(strip(a), strip(b)) {
		return ""
	}
	if malformed {
		return traceDeliberate["trace malformed\x00walrelay no trace headers, debezium a new trace, flags 03"]
	}
	return ""
}

// compareTrace compares the trace headers of each row's records: the
// header names and their order, and walrelay's and Debezium's trace id,
// span id, sampled flag and tracestate against the row's context.
func compareTrace(rep *ConfigReport, rows map[string]row, wrRecs, dbzRecs []*kgo.Record) {
	wr, _ := byID(wrRecs)
	dbz, _ := byID(dbzRecs)
	groups := map[string]*Diff{}
	var order []string
	add := func(field, kind, label, example, deliberate string) {
		k := field + "\x00" + kind
		d := groups[k]
		if d == nil {
			d = &Diff{Field: field, Between: "walrelay vs debezium vs PostgreSQL", Kind: kind, Example: label + ": " + example, Deliberate: deliberate}
			groups[k] = d
			order = append(order, k)
		}
		d.Rows = append(d.Rows, label)
	}
	for id, row := range rows {
		if len(wr[id]) == 0 || len(dbz[id]) == 0 {
			continue // missing: compare reports it
		}
		x, y := wr[id][0], dbz[id][0]
		_, _, _, _, valid := writerTrace(row.Trace)
		malformed := !valid && row.Trace != nil
		if a, b := headerNames(x), headerNames(y); !slices.Equal(a, b) {
			add("trace header names", "walrelay ["+strings.Join(a, ", ")+"], debezium ["+strings.Join(b, ", ")+"]", row.Label,
				fmt.Sprintf("%s vs %s", headersString(x.Headers), headersString(y.Headers)), namesDeliberate(a, b, malformed))
		}
		a, b := traceOutcome(x, row.Trace), traceOutcome(y, row.Trace)
		if a == b {
			continue
		}
		field := "trace"
		switch {
		case malformed:
			field = "trace malformed"
		case valid && strings.Replace(a, "the writer's span id", "a span id of its own", 1) == b:
			field = "trace span id"
			a, b = "the writer's span id", "a span id of its own"
		}
		tp1, _ := header(x, traceparentH)
		tp2, _ := header(y, traceparentH)
		kind := "walrelay " + a + ", debezium " + b
		add(field, kind, row.Label, fmt.Sprintf("traceparent %q vs %q", tp1, tp2), traceDeliberate[field+"\x00"+kind])
	}
	sort.Strings(order)
	for _, k := range order {
		d := groups[k]
		if d.Deliberate == "" {
			rep.Unexpected++
		}
		rep.Diffs = append(rep.Diffs, *d)
	}
}

// otelWorker starts the Connect worker of the configurations with otel
// (nil if there is none): the same settings as the other worker's, on
// rig.ConnectOTelJars' classpath under rig.ConnectOTelProps.
func otelWorker(ctx context.Context, cfs []configuration, work string, brokers []string, props map[string]string) (*rig.ConnectWorker, error) {
	if !slices.ContainsFunc(cfs, func(cf configuration) bool { return cf.otel }) {
		return nil, nil
	}
	libs, err := rig.ConnectOTelJars(ctx, logf)
	if err != nil {
		return nil, err
	}
	return rig.StartConnectJVM(ctx, libs, filepath.Join(work, "connect-otel"), brokers, props, rig.ConnectOTelProps)
}
