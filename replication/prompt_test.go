package replication

import (
	"testing"
	"time"
)

// TestPromptDue: a status update goes out as soon as the confirmable
// position passes the one last sent, at most one per ConfirmGap, and the
// stream looks again while anything handed on is unconfirmed.
func TestPromptDue(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	gap := ConfirmGap
	cases := []struct {
		name     string
		f        promptFacts
		wantSend bool
		wantNext time.Time // zero: no need to look before the status interval
	}{
		{"advanced, last update old enough: send, look again for the rest",
			promptFacts{Now: t0.Add(gap), LastSent: t0, Confirmable: 200, Confirmed: 100, HandedEnd: 300}, true, t0.Add(2 * gap)},
		{"advanced to everything handed on: send, nothing to look for",
			promptFacts{Now: t0.Add(gap), LastSent: t0, Confirmable: 300, Confirmed: 100, HandedEnd: 300}, true, time.Time{}},
		{"advanced, last update too young: wait for the gap",
			promptFacts{Now: t0.Add(gap / 2), LastSent: t0, Confirmable: 200, Confirmed: 100, HandedEnd: 300}, false, t0.Add(gap)},
		{"advanced to everything, last update too young: still wait for the gap",
			promptFacts{Now: t0.Add(gap - 1), LastSent: t0, Confirmable: 300, Confirmed: 100, HandedEnd: 300}, false, t0.Add(gap)},
		{"exactly one gap after the last update: send",
			promptFacts{Now: t0.Add(gap), LastSent: t0, Confirmable: 101, Confirmed: 100, HandedEnd: 101}, true, time.Time{}},
		{"not advanced, something handed on: look again one gap from now, never in the past",
			promptFacts{Now: t0.Add(5 * gap), LastSent: t0, Confirmable: 100, Confirmed: 100, HandedEnd: 300}, false, t0.Add(6 * gap)},
		{"not advanced, last update young: still one gap from now",
			promptFacts{Now: t0.Add(gap / 2), LastSent: t0, Confirmable: 100, Confirmed: 100, HandedEnd: 300}, false, t0.Add(gap / 2).Add(gap)},
		{"nothing handed on, nothing to confirm: nothing to look for",
			promptFacts{Now: t0.Add(5 * gap), LastSent: t0, Confirmable: 100, Confirmed: 100, HandedEnd: 100}, false, time.Time{}},
		{"confirmable behind what was sent (never backwards): nothing sent",
			promptFacts{Now: t0.Add(5 * gap), LastSent: t0, Confirmable: 90, Confirmed: 100, HandedEnd: 100}, false, time.Time{}},
		{"an idle keepalive confirmed past what was handed on: nothing to look for",
			promptFacts{Now: t0.Add(5 * gap), LastSent: t0, Confirmable: 500, Confirmed: 500, HandedEnd: 300}, false, time.Time{}},
		{"no update sent yet on this connection: send",
			promptFacts{Now: t0, Confirmable: 200, Confirmed: 100, HandedEnd: 200}, true, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			send, next := promptDue(c.f)
			if send != c.wantSend || !next.Equal(c.wantNext) {
				t.Errorf("promptDue(%+v) = %v, %v; want %v, %v", c.f, send, next, c.wantSend, c.wantNext)
			}
			// The stream arms its read deadline at next: one in the past
			// would spin.
			if !next.IsZero() && !next.After(c.f.Now) {
				t.Errorf("promptDue(%+v): next %v is not after now", c.f, next)
			}
		})
	}
}
