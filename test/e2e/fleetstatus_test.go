package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestFleetStatusCommand: `walrelay status --config FILE --http-addr ADDR`
// beside a running fleet whose billing pipeline stopped (its table does
// not exist): one line per pipeline, in the file's order, with the state
// and published count of /pipelines (the events read back for the two
// that relay) and billing's error; exit 1, naming how many are not ready.
func TestFleetStatusCommand(t *testing.T) {
	t.Parallel()
	var file string
	edit := missingTable("billing")
	p, envs := startFleetWith(t, func(s string) string {
		s = edit(s)
		file = e2etest.WriteFile(t, t.TempDir(), "status.yaml", []byte(s))
		return s
	})
	relaying := []*fleetEnv{envs[0], envs[2]}
	for _, e := range relaying {
		waitStreaming(t, p, e)
	}
	harness.WaitFor(t, time.Minute, "pipeline billing to stop", func() bool { return pipelines(t, p)["billing"]["state"] == "stopped" })
	rolledBack := write(t, 100, relaying...)
	read := map[string]int{"billing": 0}
	for _, e := range relaying {
		read[e.name], _ = readBack(t, e, rolledBack, false)
	}
	// N.B. a pipeline is not ready while Kafka leaves its pings unanswered
	// for 15 s (a broker stalled on a busy machine: make test saw 3 of 3
	// not ready): the status is taken once the two say they are.
	harness.WaitFor(t, 2*time.Minute, "pipelines orders and shipping to be ready", func() bool {
		st := pipelines(t, p)
		return st["orders"]["ready"] == true && st["shipping"]["ready"] == true
	})
	st := pipelines(t, p)

	code, out := e2etest.RunOnce(t, nil, "status", "--config", file, "--http-addr", p.HTTPAddr())
	t.Logf("walrelay status --config:\n%s", out)
	if code != 1 || !strings.Contains(out, "walrelay status: 1 of 3 pipelines not ready") {
		t.Errorf("exit code %d, want 1 and '1 of 3 pipelines not ready':\n%s", code, out)
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || st[f[0]] == nil {
			continue
		}
		names = append(names, f[0])
		s := st[f[0]]
		if f[1] != s["state"] || f[3] != s["slot"] || f[5] != fmt.Sprint(read[f[0]]) {
			t.Errorf("status line %q: want state %v, slot %v, published %d (the events read back)", line, s["state"], s["slot"], read[f[0]])
		}
		if f[0] == "billing" && !strings.Contains(line, "no_such_outbox") {
			t.Errorf("status line %q: want billing's error", line)
		}
	}
	if strings.Join(names, " ") != strings.Join(fleetPipelines, " ") {
		t.Errorf("status lists %v, want %v", names, fleetPipelines)
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
