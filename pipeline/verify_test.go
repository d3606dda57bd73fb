package pipeline

import (
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/replication"
)

// TestBoundedConfirmer: the stream sees the tracker's watermark bounded by
// the verified position, and the bound itself for a keepalive's WAL end.
func TestBoundedConfirmer(t *testing.T) {
	cases := []struct {
		name                 string
		watermark, verified  pglogrepl.LSN
		wantWatermark, bound pglogrepl.LSN
	}{
		{"nothing verified yet", 100, 0, 0, 0},
		{"verified behind the watermark", 100, 60, 60, 60},
		{"verified ahead of the watermark", 100, 500, 100, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newVerifier(replication.Config{})
			v.verified.Store(uint64(c.verified))
			b := boundedConfirmer{checkpoint.New(c.watermark), v}
			var _ replication.Bounder = b
			if got := b.Watermark(); got != c.wantWatermark {
				t.Errorf("Watermark() = %s, want %s", got, c.wantWatermark)
			}
			if got := b.Bound(); got != c.bound {
				t.Errorf("Bound() = %s, want %s", got, c.bound)
			}
		})
	}
}
