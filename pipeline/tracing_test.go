package pipeline

import (
	"context"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/tracing"
)

// TestSpanConfirmer: with spans exported, the stream sees the bounded
// confirmer's watermark no further than the span gate, and a keepalive's
// WAL end bounded by the gate only while spans below the watermark wait;
// without spans, the confirmer itself.
func TestSpanConfirmer(t *testing.T) {
	cases := []struct {
		name                          string
		watermark, verified, exported pglogrepl.LSN
		wantWatermark, bound          pglogrepl.LSN
	}{
		{"spans wait below the watermark", 100, 500, 60, 60, 60},
		{"spans wait, verified behind the gate", 100, 40, 60, 40, 40},
		{"every span exported", 100, 500, 100, 100, 500},
		{"gate past the watermark (raised)", 100, 500, 300, 100, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newVerifier(replication.Config{})
			v.verified.Store(uint64(c.verified))
			inner := boundedConfirmer{checkpoint.New(c.watermark), v}
			counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
			rt := relayTracing{gate: tracing.NewGate(tracing.GateConfig{Flush: func(context.Context) error { return nil }, Exported: counter, GaveUp: counter})}
			b := rt.confirmer(inner, c.exported)
			if got := b.Watermark(); got != c.wantWatermark {
				t.Errorf("Watermark() = %s, want %s", got, c.wantWatermark)
			}
			if got := b.(replication.Bounder).Bound(); got != c.bound {
				t.Errorf("Bound() = %s, want %s", got, c.bound)
			}
		})
	}
	inner := boundedConfirmer{checkpoint.New(100), newVerifier(replication.Config{})}
	if got := (relayTracing{}).confirmer(inner, 0); got != replication.Confirmer(inner) {
		t.Errorf("without spans the confirmer is %T, want the bounded confirmer itself", got)
	}
}
