package pgcatalog

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/replication"
)

func TestFailoverModeWant(t *testing.T) {
	for _, tc := range []struct {
		mode    replication.FailoverMode
		version int
		want    bool
		setup   bool
	}{
		{replication.FailoverAuto, 160004, false, false},
		{replication.FailoverAuto, 170000, true, false},
		{replication.FailoverAuto, 180004, true, false},
		{replication.FailoverOn, 150018, false, true},
		{replication.FailoverOn, 170010, true, false},
		{replication.FailoverOff, 170010, false, false},
		{replication.FailoverOff, 140000, false, false},
	} {
		t.Run(fmt.Sprintf("%q/%d", tc.mode, tc.version), func(t *testing.T) {
			got, err := failoverWanted(tc.mode, tc.version)
			if got != tc.want || errors.Is(err, replication.ErrSetup) != tc.setup {
				t.Errorf("failoverWanted(%q, %d) = %v, %v; want %v, setup error %v", tc.mode, tc.version, got, err, tc.want, tc.setup)
			}
		})
	}
}

func TestStandbySlotProblems(t *testing.T) {
	ready := StandbySlot{Exists: true, Synced: true, InRecovery: true, SyncSlots: "on", HotStandbyFeedback: "on", PrimarySlot: "sb"}
	if p := ready.Problems("s"); len(p) != 0 {
		t.Errorf("a ready standby has problems: %v", p)
	}
	for _, tc := range []struct {
		name   string
		change func(*StandbySlot)
		want   string
	}{
		{"missing", func(s *StandbySlot) { s.Exists = false }, "does not exist on the standby"},
		{"not synced", func(s *StandbySlot) { s.Synced = false }, "synced = false"},
		{"temporary", func(s *StandbySlot) { s.Temporary = true }, "is temporary"},
		{"invalidated", func(s *StandbySlot) { s.Invalidation = "rows_removed" }, "invalidated (rows_removed)"},
		{"sync off", func(s *StandbySlot) { s.SyncSlots = "off" }, "sync_replication_slots is off"},
		{"feedback off", func(s *StandbySlot) { s.HotStandbyFeedback = "off" }, "hot_standby_feedback is off"},
		{"no primary slot", func(s *StandbySlot) { s.PrimarySlot = "" }, "primary_slot_name is empty"},
		{"not a standby", func(s *StandbySlot) { s.InRecovery = false }, "not a standby"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ready
			tc.change(&s)
			if p := strings.Join(s.Problems("s"), "; "); !strings.Contains(p, tc.want) {
				t.Errorf("Problems = %q, want one saying %q", p, tc.want)
			}
		})
	}
}

func TestSlotGoneIsSlotLost(t *testing.T) {
	err := error(&slotGoneError{msg: "gone"})
	if !errors.Is(err, replication.ErrSlotGone) || !errors.Is(err, replication.ErrSlotLost) || errors.Is(err, replication.ErrSetup) {
		t.Errorf("slot gone error: Is(ErrSlotGone)=%v Is(ErrSlotLost)=%v Is(ErrSetup)=%v; want true, true, false",
			errors.Is(err, replication.ErrSlotGone), errors.Is(err, replication.ErrSlotLost), errors.Is(err, replication.ErrSetup))
	}
}
