package debezium

import (
	"strings"
	"testing"
)

// TestImportTracing: the router's tracing options are mapped, not
// refused: the context column to --trace-context-column, the operation
// name to a note, tracing.with.context.field.only either way to nothing;
// an unknown tracing.* option or a bad value is listed.
func TestImportTracing(t *testing.T) {
	find := func(r Result, flag string) (string, bool) {
		for _, s := range r.Settings {
			if s.Flag == flag {
				return s.Value, true
			}
		}
		return "", false
	}
	m := baseConnector()
	if v, ok := find(Import(m), "trace-context-column"); ok {
		t.Errorf("no tracing options: --trace-context-column %q printed", v)
	}
	m["transforms.outbox.tracing.span.context.field"] = "trace_ctx"
	m["transforms.outbox.tracing.operation.name"] = "outbox-read"
	m["transforms.outbox.tracing.with.context.field.only"] = "true"
	r := Import(m)
	if v, _ := find(r, "trace-context-column"); v != "trace_ctx" {
		t.Errorf("--trace-context-column %q, want trace_ctx", v)
	}
	if len(r.Unsupported) != 0 {
		t.Errorf("unsupported: %v", r.Unsupported)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "tracing.operation.name=outbox-read") {
		t.Errorf("notes %v: the operation name not explained", r.Notes)
	}
	m["transforms.outbox.tracing.with.context.field.only"] = "maybe"
	m["transforms.outbox.tracing.sampler"] = "x"
	r = Import(m)
	got := strings.Join(r.Unsupported, "\n")
	for _, k := range []string{"tracing.with.context.field.only=maybe", "tracing.sampler=x"} {
		if !strings.Contains(got, k) {
			t.Errorf("unsupported %q does not list %s", got, k)
		}
	}
}
