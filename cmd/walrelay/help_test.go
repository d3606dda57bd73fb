package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTopLevelHelpListsCommands: `walrelay --help` lists every sub-command
// with its line, not the run flags.
func TestTopLevelHelpListsCommands(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "help"} {
		t.Run(arg, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := realMain([]string{arg}, &out, &errOut); code != exitOK {
				t.Errorf("exit code %d, want 0; stderr:\n%s", code, errOut.String())
			}
			for _, want := range []string{
				"  run      stream outbox inserts to Kafka",
				"  check    check PostgreSQL and Kafka",
				"  status   show the slot",
				"  setup    create (or --print)",
				"  health   probe a running walrelay's /readyz",
				"  version  print the version",
				"'walrelay run -h'",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("help lacks %q:\n%s", want, out.String())
				}
			}
			if strings.Contains(out.String(), "-pg-url") {
				t.Errorf("top-level help lists run's flags:\n%s", out.String())
			}
		})
	}
}

// TestProductFlagsLackBenchSwitches: the product's build has no switch that
// drops events or writes a profile file (they are the bench build's).
func TestProductFlagsLackBenchSwitches(t *testing.T) {
	var out, errOut bytes.Buffer
	realMain([]string{"run", "-h"}, &out, &errOut)
	help := out.String() + errOut.String()
	if !strings.Contains(help, "-http-pprof") {
		t.Fatalf("run -h lacks --http-pprof:\n%s", help)
	}
	for _, name := range []string{"-bench-null-sink", "-cpu-profile"} {
		if strings.Contains(help, name) {
			t.Errorf("run -h lists %s, a bench build switch", name)
		}
	}
}
