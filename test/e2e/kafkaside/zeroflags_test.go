package kafkaside

import (
	"slices"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// TestZeroDurationsAreRefused: --status-interval and --shutdown-timeout of
// 0, from a flag or the environment, are configuration mistakes: exit 2
// with what to set, before anything is created.
func TestZeroDurationsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := []string{"run", "--pg-url", e.DSN, "--brokers", strings.Join(e.Bed.Brokers(), ","), "--slot", e.Slot, "--publication", e.Pub, "--http-addr", ""}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"status interval flag", nil, []string{"--status-interval", "0"}, "--status-interval 0s: want 100ms or more"},
		{"status interval env", []string{"WALRELAY_STATUS_INTERVAL=0s"}, nil, "--status-interval 0s: want 100ms or more"},
		{"shutdown timeout flag", nil, []string{"--shutdown-timeout", "0"}, "--shutdown-timeout 0s: want more than 0"},
		{"shutdown timeout env", []string{"WALRELAY_SHUTDOWN_TIMEOUT=0"}, nil, "--shutdown-timeout 0s: want more than 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := e2etest.RunOnce(t, c.env, slices.Concat(base, c.args)...)
			if code != 2 {
				t.Errorf("exit code %d, want 2; output:\n%s", code, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out)
			}
		})
	}
	if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
		t.Errorf("a refused start created slot %s", e.Slot)
	}
}
