package pipeline

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestHeldDecision(t *testing.T) {
	for _, c := range []struct {
		name                string
		prevSuspect         bool
		prevPos, pos, wal   pglogrepl.LSN
		holds               bool
		wantSuspect, wantHd bool
	}{
		{"setting satisfied", true, 10, 10, 50, false, false, false},
		{"caught up", true, 10, 50, 50, true, false, false},
		{"first poll behind", false, 0, 10, 50, true, true, false},
		{"second poll, not moved", true, 10, 10, 60, true, true, true},
		{"second poll, moved", true, 10, 20, 60, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, h := heldDecision(c.prevSuspect, c.prevPos, c.pos, c.wal, c.holds)
			if s != c.wantSuspect || h != c.wantHd {
				t.Errorf("heldDecision = suspect %v, held %v; want %v, %v", s, h, c.wantSuspect, c.wantHd)
			}
		})
	}
}
