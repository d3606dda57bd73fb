package fleet

import (
	"net/http/httptest"
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

// TestGroupOwnerOnPageAndPipelines: in a group, a pipeline run here shows
// its owner (escaped on the page); one run elsewhere shows as elsewhere,
// without an owner, and does not count against /readyz.
func TestGroupOwnerOnPageAndPipelines(t *testing.T) {
	f := testFleet(t, `brokers: localhost:9092
defaults:
  publication: outbox_pub
  pg-require-verified-tls: false
pipelines:
  - name: here
    pg-url: postgres://relay@db1.internal:5432/a?sslmode=disable
    slot: a
  - name: there
    pg-url: postgres://relay@db2.internal:5432/b?sslmode=disable
    slot: b
`)
	f.group = &groupRun{name: "g"}
	f.group.joined.Store(true)
	for _, m := range f.members {
		m.grouped = true
	}
	owner := "<i>r1</i>"
	f.members[0].owner.Store(&owner)
	st := f.statuses()
	if st[0].Owner != owner || st[0].State == stateElsewhere || st[1].State != stateElsewhere || st[1].Owner != "" || st[1].Ready {
		t.Errorf("statuses: %+v, want here owned by %s, there elsewhere without an owner", st, owner)
	}
	ok, why := f.Ready()
	if ok || !strings.Contains(why, "here: ") || strings.Contains(why, "there") {
		t.Errorf("Ready: %v %q, want not ready naming here alone (it does not stream), not there", ok, why)
	}
	rec := httptest.NewRecorder()
	f.servePage(rec, httptest.NewRequest("GET", "/", nil))
	page := rec.Body.String()
	if !strings.Contains(page, "on &lt;i&gt;r1&lt;/i&gt;") || strings.Contains(page, "<i>r1") {
		t.Errorf("the page does not show the owner escaped:\n%s", page)
	}
	f.members[0].owner.Store(nil)
	if ok, why := f.Ready(); !ok {
		t.Errorf("Ready with no pipeline here: %q, want ready", why)
	}
}
