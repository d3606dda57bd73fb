package replication

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestReportedPositions: which position a status update confirms, as
// write, flush and apply alike.
func TestReportedPositions(t *testing.T) {
	cases := []struct {
		name string
		f    positionFacts
		want pglogrepl.LSN
	}{
		{"the watermark", positionFacts{Watermark: 100, Confirmed: 50}, 100},
		{"nothing acknowledged since the last update", positionFacts{Watermark: 50, Confirmed: 50}, 50},
		{"never backwards", positionFacts{Watermark: 40, Confirmed: 50}, 50},
		{"keepalive while idle: its WAL end", positionFacts{Watermark: 100, WALEnd: 300, Idle: true, Confirmed: 100}, 300},
		{"keepalive while not idle: the watermark", positionFacts{Watermark: 100, WALEnd: 300, Confirmed: 50}, 100},
		{"keepalive behind the watermark", positionFacts{Watermark: 100, WALEnd: 80, Idle: true, Confirmed: 50}, 100},
		{"WAL end without idle is ignored", positionFacts{Watermark: 0, WALEnd: 300, Confirmed: 0}, 0},
		{"bounded below the watermark", positionFacts{Watermark: 100, Bound: 60, Bounded: true, Confirmed: 10}, 60},
		{"bound above the watermark", positionFacts{Watermark: 100, Bound: 500, Bounded: true, Confirmed: 10}, 100},
		{"idle keepalive bounded", positionFacts{Watermark: 100, WALEnd: 300, Idle: true, Bound: 200, Bounded: true, Confirmed: 10}, 200},
		{"zero bound counts when bounded", positionFacts{Watermark: 100, Bounded: true}, 0},
		{"bound below what was sent: never backwards", positionFacts{Watermark: 100, Bound: 30, Bounded: true, Confirmed: 50}, 50},
		{"unbounded ignores Bound", positionFacts{Watermark: 100, Bound: 30, Confirmed: 10}, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, f, a := reportedPositions(c.f)
			if w != c.want || f != c.want || a != c.want {
				t.Errorf("reportedPositions(%+v) = write %s, flush %s, apply %s; want %s for each", c.f, w, f, a, c.want)
			}
		})
	}
}
