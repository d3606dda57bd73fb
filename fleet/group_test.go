package fleet

import (
	"strings"
	"testing"
)

// TestFingerprint: the fingerprint of a group's file is its pipelines as
// they run: neither the order, comments nor the process-wide settings
// count; a pipeline's setting, its name or a default does.
func TestFingerprint(t *testing.T) {
	const base = `brokers: k:9092
http-addr: :8080
group: g
defaults:
  publication: p
pipelines:
  - name: a
    slot: sa
  - name: b
    slot: sb
`
	same := map[string]string{
		"order":         strings.Replace(base, "  - name: a\n    slot: sa\n  - name: b\n    slot: sb\n", "  - name: b\n    slot: sb\n  - name: a\n    slot: sa\n", 1),
		"comment":       "# the fleet\n" + base,
		"process-wide":  strings.Replace(base, "http-addr: :8080", "http-addr: :9090\nlog-level: debug", 1),
		"default given": strings.Replace(strings.Replace(base, "defaults:\n  publication: p\n", "defaults: {}\n", 1), "    slot: s", "    publication: p\n    slot: s", -1),
	}
	other := map[string]string{
		"a setting":  strings.Replace(base, "slot: sb", "slot: sc", 1),
		"a name":     strings.Replace(base, "name: b", "name: c", 1),
		"a default":  strings.Replace(base, "publication: p", "publication: q", 1),
		"a pipeline": base + "  - name: c\n    slot: sc\n",
	}
	want := fingerprint([]byte(base))
	for name, f := range same {
		if got := fingerprint([]byte(f)); got != want {
			t.Errorf("%s: fingerprint %s, want the base's %s", name, got, want)
		}
	}
	for name, f := range other {
		if got := fingerprint([]byte(f)); got == want {
			t.Errorf("%s changed: fingerprint unchanged", name)
		}
	}
	if g := groupOf([]byte(base)); g != "g" {
		t.Errorf("groupOf = %q, want g", g)
	}
}

// TestStatusElsewhereIsNotUnready: walrelay status --config asked of one
// replica of a group counts the pipelines it runs, not those elsewhere.
func TestStatusElsewhereIsNotUnready(t *testing.T) {
	var b strings.Builder
	list := []Status{{Name: "a", State: "streaming", Ready: true, Owner: "r1"}, {Name: "b", State: stateElsewhere}, {Name: "c", State: "restarting", Owner: "r1"}}
	if n := writeStatus(&b, list); n != 1 {
		t.Errorf("writeStatus counts %d not ready, want 1 (c; b is elsewhere):\n%s", n, b.String())
	}
}
