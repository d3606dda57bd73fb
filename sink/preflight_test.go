package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/preflight"
)

func TestPreflight(t *testing.T) {
	c := newCluster(t)
	probed := 0
	probe := func(ctx context.Context, adm *kadm.Client) preflight.Check {
		probed++
		return preflight.Check{Name: "probe", Note: "ran"}
	}
	names := func(checks []preflight.Check) string {
		var s []string
		for _, ch := range checks {
			s = append(s, ch.Name)
		}
		return strings.Join(s, ", ")
	}
	cases := []struct {
		name   string
		cfg    Config
		names  string
		last   string // the last check's note, or its error with a "FAIL " prefix
		probes int
	}{
		{"dead-letter topic missing, created at start", Config{CreateTopics: true},
			"reach Kafka, probe, dead-letter topic walrelay.dlq", "missing: will be created at start (--create-topics)", 1},
		{"dead-letter topic missing, not created", Config{DeadLetterTopic: "dlq"},
			"reach Kafka, probe, dead-letter topic dlq", "FAIL topic dlq does not exist and --create-topics is off: create it", 1},
		{"halt: no dead-letter topic", Config{OnPoison: OnPoisonHalt},
			"reach Kafka, probe", "ran", 1},
		{"no broker answers: that check alone", Config{Brokers: []string{"127.0.0.1:1"}},
			"reach Kafka", "FAIL reach kafka at 127.0.0.1:1: ", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			probed = 0
			if tc.cfg.Brokers == nil {
				tc.cfg.Brokers = c.ListenAddrs()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			checks := Preflight(ctx, tc.cfg, probe)
			if got := names(checks); got != tc.names {
				t.Fatalf("checks %q, want %q", got, tc.names)
			}
			last := checks[len(checks)-1]
			got := last.Note
			if last.Err != nil {
				got = "FAIL " + last.Err.Error()
			}
			if !strings.HasPrefix(got, tc.last) {
				t.Errorf("last check %q, want it to start %q", got, tc.last)
			}
			if probed != tc.probes {
				t.Errorf("probes ran %d times, want %d", probed, tc.probes)
			}
		})
	}
}

func TestPreflightExactlyOnce(t *testing.T) {
	c := newCluster(t)
	checks := PreflightExactlyOnce(t.Context(), Config{Brokers: c.ListenAddrs(), TransactionalID: "walrelay-s"})
	if len(checks) != 1 || checks[0].Err != nil || !strings.Contains(checks[0].Note, `probe id "walrelay-s.check"`) {
		t.Fatalf("checks %+v, want Kafka transactions passed with the probe id", checks)
	}
}
