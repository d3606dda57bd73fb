package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/replication"
)

// stagesOf parses args (and the environment) as `walrelay run` does.
func stagesOf(t *testing.T, args ...string) (replication.Config, error) {
	t.Helper()
	var cfg config
	fs := newFlagSet("run", &cfg)
	if err := kit.Parse(fs, append([]string{"--pg-url", "postgres://localhost/db"}, args...), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	pc, err := cfg.stages()
	return pc.Replication, err
}

func TestZeroDurationsAreRefused(t *testing.T) {
	cases := []struct {
		name string
		env  [2]string
		args []string
		want string
	}{
		{"status interval flag", [2]string{}, []string{"--status-interval", "0"}, "--status-interval 0s: want 100ms or more"},
		{"status interval env", [2]string{"WALRELAY_STATUS_INTERVAL", "0s"}, nil, "--status-interval 0s: want 100ms or more"},
		{"negative status interval", [2]string{}, []string{"--status-interval", "-1s"}, "--status-interval -1s: want 100ms or more"},
		{"shutdown timeout flag", [2]string{}, []string{"--shutdown-timeout", "0"}, "--shutdown-timeout 0s: want more than 0"},
		{"shutdown timeout env", [2]string{"WALRELAY_SHUTDOWN_TIMEOUT", "0"}, nil, "--shutdown-timeout 0s: want more than 0"},
		{"negative shutdown timeout", [2]string{}, []string{"--shutdown-timeout", "-5s"}, "--shutdown-timeout -5s: want more than 0"},
		{"zero message limit", [2]string{}, []string{"--pg-max-message-bytes", "0"}, "--pg-max-message-bytes 0: want 65536 to 1073741824"},
		{"message limit too small", [2]string{}, []string{"--pg-max-message-bytes", "1000"}, "--pg-max-message-bytes 1000: want 65536 to 1073741824"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			_, err := stagesOf(t, c.args...)
			if err == nil {
				t.Fatalf("no error, want one with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error lacks %q:\n%v", c.want, err)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("%d problems reported for one mistake:\n%v", n, err)
			}
		})
	}
}

// TestStagesSeeEffectiveValues: what the relay around the stages reads
// (watch loop, health check, drain) is what the stages use.
func TestStagesSeeEffectiveValues(t *testing.T) {
	rc, err := stagesOf(t, "--status-interval", "2s", "--shutdown-timeout", "7s", "--pg-max-message-bytes", "1048576")
	if err != nil {
		t.Fatal(err)
	}
	if rc.StatusInterval != 2*time.Second || rc.ShutdownTimeout != 7*time.Second || rc.MaxMessageBytes != 1<<20 {
		t.Errorf("status interval %s, shutdown timeout %s, message limit %d: want the flags' 2s, 7s, 1048576", rc.StatusInterval, rc.ShutdownTimeout, rc.MaxMessageBytes)
	}
	if got := rc.WithDefaults(); got.StatusInterval != rc.StatusInterval || got.ShutdownTimeout != rc.ShutdownTimeout ||
		got.MaxMessageBytes != rc.MaxMessageBytes || got.Slot != rc.Slot || got.Publication != rc.Publication {
		t.Errorf("the configuration handed to the relay is not the effective one: %+v, the stages use %+v", rc, got)
	}
	rc, err = stagesOf(t)
	if err != nil {
		t.Fatal(err)
	}
	if rc.StatusInterval != 10*time.Second || rc.ShutdownTimeout != 30*time.Second || rc.MaxMessageBytes != 64<<20 {
		t.Errorf("defaults: status interval %s, shutdown timeout %s, message limit %d; want 10s, 30s, 64 MiB", rc.StatusInterval, rc.ShutdownTimeout, rc.MaxMessageBytes)
	}
}
