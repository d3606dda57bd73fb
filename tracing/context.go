package tracing

import (
	"bytes"
	"encoding/hex"
	"strings"

	"github.com/walrelay/walrelay/internal/javaprops"
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

// Split finds the traceparent and tracestate values in a trace-context
// value: a java.util.Properties text (the Quarkus outbox extension writes
// "#<date>\ntraceparent=00-...-01\n", tracestate beside it when set), or a
// bare W3C traceparent. ok is false when it holds no valid traceparent
// (ValidTraceparent). The values are sub-slices of v unless v uses
// Properties' escapes.
func Split(v []byte) (traceparent, tracestate []byte, ok bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, nil, false
	}
	if bytes.HasPrefix(v, []byte("00-")) && !bytes.ContainsAny(v, "=:\n") {
		return v, nil, ValidTraceparent(v)
	}
	if bytes.IndexByte(v, '\\') >= 0 {
		// N.B. escapes and continued lines: the full reader (rare; the
		// extension writes none for these values).
		m := properties(string(v))
		tp, ts := []byte(m[HeaderTraceparent]), []byte(m[HeaderTracestate])
		return tp, ts, ValidTraceparent(tp)
	}
	for len(v) > 0 {
		var line []byte
		if i := bytes.IndexByte(v, '\n'); i >= 0 {
			line, v = v[:i], v[i+1:]
		} else {
			line, v = v, nil
		}
		line = bytes.TrimLeft(bytes.TrimRight(line, "\r"), " \t\f")
		if len(line) == 0 || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, val := splitEntry(line)
		switch {
		case bytes.EqualFold(k, []byte(HeaderTraceparent)):
			traceparent = val
		case bytes.EqualFold(k, []byte(HeaderTracestate)):
			tracestate = val
		}
	}
	return traceparent, tracestate, ValidTraceparent(traceparent)
}

// ValidTraceparent reports whether tp is a W3C traceparent walrelay can
// continue: version 00 (55 characters) or a later version (at least 55,
// the 56th a '-'), never ff; lower-case hex ids, neither all zeros.
func ValidTraceparent(tp []byte) bool {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	if !lowerHex(tp[0:2]) || string(tp[0:2]) == "ff" || !lowerHex(tp[53:55]) {
		return false
	}
	if string(tp[0:2]) == "00" && len(tp) != 55 || len(tp) > 55 && tp[55] != '-' {
		return false
	}
	return lowerHex(tp[3:35]) && !zeros(tp[3:35]) && lowerHex(tp[36:52]) && !zeros(tp[36:52])
}

func lowerHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func zeros(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}

// Parse reads a trace-context value (Split) into a remote span context.
func Parse(v []byte) (sc trace.SpanContext, ok bool) {
	tp, ts, ok := Split(v)
	if !ok {
		return sc, false
	}
	return spanContext(tp, ts)
}

// spanContext is the span context of a valid traceparent and a
// tracestate (a malformed tracestate is dropped, as the W3C propagator
// does).
func spanContext(tp, ts []byte) (trace.SpanContext, bool) {
	var cfg trace.SpanContextConfig
	_, _ = hex.Decode(cfg.TraceID[:], tp[3:35])
	_, _ = hex.Decode(cfg.SpanID[:], tp[36:52])
	var flags [1]byte
	_, _ = hex.Decode(flags[:], tp[53:55])
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & trace.FlagsSampled
	cfg.Remote = true
	if len(ts) > 0 {
		if state, err := trace.ParseTraceState(string(ts)); err == nil {
			cfg.TraceState = state
		}
	}
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
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
func splitEntry[T string | []byte](line T) (k, v T) {
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
	rest = trimBlanks(rest)
	if len(rest) > 0 && (rest[0] == '=' || rest[0] == ':') {
		rest = trimBlanks(rest[1:])
	}
	return k, rest
}

// trimBlanks drops the blanks Properties skips before a key or a value.
func trimBlanks[T string | []byte](s T) T {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\f') {
		s = s[1:]
	}
	return s
}

// unescape resolves Properties' backslash escapes; a malformed \u escape
// leaves s as it is (the context is then malformed, never an error).
func unescape(s string) string {
	if u, err := javaprops.Unescape(s); err == nil {
		return u
	}
	return s
}
