package tracing

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// DefaultColumn is the outbox column that holds an event's trace context:
// the name Debezium's Outbox Event Router reads (tracing.span.context.field)
// and the Quarkus outbox extension writes.
const DefaultColumn = "tracingspancontext"

// The W3C Trace Context header names, spelled as OpenTelemetry's
// propagator (and so Debezium) writes them.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

var w3c = propagation.TraceContext{}

// Parse reads a trace-context value: a java.util.Properties text (the
// Quarkus outbox extension writes "#<date>\ntraceparent=00-...-01\n",
// tracestate beside it when set), or a bare W3C traceparent. ok is false
// when the value holds no valid traceparent.
func Parse(v []byte) (sc trace.SpanContext, ok bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return sc, false
	}
	carrier := propagation.MapCarrier{}
	if bytes.HasPrefix(v, []byte("00-")) && !bytes.ContainsAny(v, "=:\n") {
		carrier[HeaderTraceparent] = string(v)
	} else {
		carrier = properties(string(v))
	}
	sc = trace.SpanContextFromContext(w3c.Extract(context.Background(), carrier))
	return sc, sc.IsValid()
}

// Headers renders sc as the traceparent and tracestate header values
// (tracestate "" when empty).
func Headers(sc trace.SpanContext) (traceparent, tracestate string) {
	c := propagation.MapCarrier{}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c[HeaderTraceparent], c[HeaderTracestate]
}

// properties reads a java.util.Properties text (Properties.load): one
// entry per logical line ("\" at the end joins the next), '#' and '!'
// comment lines, the key ending at the first unescaped '=', ':' or blank,
// backslash escapes (\t, \n, \r, \f, \uXXXX; any other character stands
// for itself). Keys are lower-cased, as propagation.MapCarrier's Get
// looks them up.
func properties(s string) propagation.MapCarrier {
	m := propagation.MapCarrier{}
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continued(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		k, v := splitEntry(line)
		m[strings.ToLower(unescape(k))] = unescape(v)
	}
	return m
}

// continued reports whether line ends in an odd number of backslashes.
func continued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitEntry splits a logical line into its key and value (still escaped).
func splitEntry(line string) (k, v string) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	k, rest := line[:end], line[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return k, rest
}

// unescape resolves Properties' backslash escapes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+4 < len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+5], 16, 16); err == nil {
					b.WriteRune(rune(r))
					i += 4
					continue
				}
			}
			b.WriteByte('u')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
