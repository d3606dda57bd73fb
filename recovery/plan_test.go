package recovery

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/kafkastate"
)

// TestNothingToDo: which marker and slot a recovery or a backfill acts on.
func TestNothingToDo(t *testing.T) {
	unfinished := kafkastate.Marker{Recovery: &kafkastate.Recovery{Kind: "recover", StartedAt: time.Now()}}
	for _, tc := range []struct {
		name          string
		kind          Kind
		found, exists bool
		marker        kafkastate.Marker
		want          string // "" acts; else a part of the reason
	}{
		{"recover: slot gone", Recover, true, false, kafkastate.Marker{}, ""},
		{"recover: never streamed", Recover, false, false, kafkastate.Marker{}, "no marker of this slot"},
		{"recover: slot exists", Recover, true, true, kafkastate.Marker{}, "the slot exists"},
		{"recover: unfinished, slot left", Recover, true, true, unfinished, ""},
		{"recover: unfinished, no slot", Recover, true, false, unfinished, ""},
		{"backfill: new", Backfill, false, false, kafkastate.Marker{}, ""},
		{"backfill: slot walrelay never streamed", Backfill, false, true, kafkastate.Marker{}, ""},
		{"backfill: streamed", Backfill, true, true, kafkastate.Marker{}, "nothing to backfill"},
		{"backfill: slot gone", Backfill, true, false, kafkastate.Marker{}, "walrelay recover"},
		{"backfill: unfinished", Backfill, true, true, unfinished, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nothingToDo(tc.kind, plan{found: tc.found, exists: tc.exists, marker: tc.marker})
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("nothingToDo = %q, want %q", got, tc.want)
			}
		})
	}
}
