package fleet

import (
	"strings"
	"testing"
	"time"
)

// TestGroupSession: group-session-timeout: sets the group's session, and
// its heartbeat to a tenth of it; absent, 10 s; without a group, out of
// Kafka's default bounds or not a duration, load refuses it with the fix.
func TestGroupSession(t *testing.T) {
	const pipelines = "pipelines:\n  - name: a\n    pg-url: postgres://localhost/a\n    slot: a\n"
	for _, tc := range []struct {
		name, top string
		session   time.Duration
		want      string // the mistake; "": none
	}{
		{name: "default", top: "group: g\n", session: 10 * time.Second},
		{name: "set", top: "group: g\ngroup-session-timeout: 45s\n", session: 45 * time.Second},
		{name: "the least", top: "group: g\ngroup-session-timeout: 6s\n", session: 6 * time.Second},
		{name: "the most", top: "group: g\ngroup-session-timeout: 30m\n", session: 30 * time.Minute},
		{name: "too short", top: "group: g\ngroup-session-timeout: 5s\n", session: 10 * time.Second,
			want: `f.yaml:2: group-session-timeout: "5s": want a duration from 6s to 30m0s (Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms by default), e.g. 30s; the default is 10s`},
		{name: "too long", top: "group: g\ngroup-session-timeout: 31m\n", session: 10 * time.Second, want: `f.yaml:2: group-session-timeout: "31m": want a duration from 6s`},
		{name: "no unit", top: "group: g\ngroup-session-timeout: 30\n", session: 10 * time.Second, want: `f.yaml:2: group-session-timeout: "30": want a duration`},
		{name: "no group", top: "group-session-timeout: 30s\n", session: 10 * time.Second,
			want: `f.yaml:1: group-session-timeout: is the session of a group's replicas: set group: NAME too, or remove it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.top + pipelines)
			f, _ := parseFile(data)
			if got, _ := groupSession(f); got != tc.session {
				t.Errorf("session %s, want %s", got, tc.session)
			}
			top, _ := testPipeline()
			_, ms := load(data, top, testPipeline)
			got := strings.TrimSpace(format("f.yaml", ms))
			switch {
			case tc.want == "" && len(ms) > 0:
				t.Errorf("mistakes: %s, want none", got)
			case tc.want != "" && (len(ms) != 1 || !strings.Contains(got, tc.want)):
				t.Errorf("mistakes: %s\nwant one: %s", got, tc.want)
			}
		})
	}
	if got := heartbeatOf(10 * time.Second); got != time.Second {
		t.Errorf("heartbeat of a 10s session: %s, want 1s", got)
	}
}
