package main

import (
	"bytes"
	"testing"

	"github.com/walrelay/walrelay/replication"
)

// TestSlotFailoverFlag: --slot-failover is auto unless given; a bare flag
// is true; the environment sets it too; other values are refused.
func TestSlotFailoverFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want replication.FailoverMode
		bad  bool
	}{
		{"default", nil, "", replication.FailoverAuto, false},
		{"bare", []string{"--slot-failover"}, "", replication.FailoverOn, false},
		{"true", []string{"--slot-failover=true"}, "", replication.FailoverOn, false},
		{"false", []string{"--slot-failover=false"}, "", replication.FailoverOff, false},
		{"env", nil, "false", replication.FailoverOff, false},
		{"env auto", nil, "auto", replication.FailoverAuto, false},
		{"bad", []string{"--slot-failover=maybe"}, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("WALRELAY_SLOT_FAILOVER", tc.env)
			}
			var cfg config
			fs := newFlagSet("run", &cfg)
			err := kit.Parse(fs, tc.args, &bytes.Buffer{})
			if tc.bad {
				if err == nil {
					t.Errorf("--slot-failover=maybe accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Replication.SlotFailover != tc.want {
				t.Errorf("mode %q, want %q", cfg.Replication.SlotFailover, tc.want)
			}
			cfg.Replication.ConnString = "postgres://localhost/db"
			pc, err := cfg.stages()
			rc := pc.Replication
			if err != nil {
				t.Fatal(err)
			}
			if rc.SlotFailover != tc.want {
				t.Errorf("replication config's SlotFailover %q, want %q", rc.SlotFailover, tc.want)
			}
		})
	}
}
