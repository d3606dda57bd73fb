package pgcatalog

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/decode"
)

// TestEmitSQLTraceOverload: setup's walrelay.emit has an overload taking
// the trace context, which writes it as the configured field
// (tracingspancontext by default, another name with
// --trace-context-column); with the field off (-) there is none.
func TestEmitSQLTraceOverload(t *testing.T) {
	for _, tc := range []struct {
		column, want string // want: the overload's field; "" none
	}{
		{"", "'tracingspancontext', traceparent"},
		{"span_ctx", "'span_ctx', traceparent"},
		{"-", ""},
	} {
		dc := decode.Config{IDColumn: "id", KeyColumn: "aggregateid", PayloadColumn: "payload", TraceContextColumn: tc.column}
		stmts, err := EmitSQL(dc)
		if err != nil {
			t.Fatalf("%q: %v", tc.column, err)
		}
		var four, five string
		for _, s := range stmts {
			switch {
			case strings.HasPrefix(s, "CREATE OR REPLACE FUNCTION walrelay.emit(aggregatetype text, aggregateid text, type text, payload jsonb) "):
				four = s
			case strings.HasPrefix(s, "CREATE OR REPLACE FUNCTION walrelay.emit(aggregatetype text, aggregateid text, type text, payload jsonb, traceparent text) "):
				five = s
			}
		}
		if four == "" || strings.Contains(four, "traceparent") {
			t.Errorf("%q: the four-argument function %q, want one without a trace context", tc.column, four)
		}
		switch {
		case tc.want == "" && five != "":
			t.Errorf("%q: an overload with the trace context, want none: %s", tc.column, five)
		case tc.want != "" && !strings.Contains(five, tc.want):
			t.Errorf("%q: overload %q, want it to write %s", tc.column, five, tc.want)
		}
	}
}
