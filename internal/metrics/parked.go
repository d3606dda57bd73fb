package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// parkedGauges are --on-poison=park's: what is parked now.
type parkedGauges struct {
	aggregates prometheus.Gauge
	events     prometheus.Gauge
	oldest     atomic.Int64 // unix nanoseconds of the oldest parked aggregate's first event; 0: none
}

// newParked registers the parked gauges on reg.
func newParked(reg *prometheus.Registry) *parkedGauges {
	p := &parkedGauges{
		aggregates: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_parked_aggregates", Help: "Aggregates parked behind a poison event (--on-poison=park): their events go to the dead-letter topic until walrelay dlq redrive or discard.",
		}),
		events: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_parked_events", Help: "Events dead-lettered behind the parked aggregates, their first (poison) events included.",
		}),
	}
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walrelay_parked_oldest_seconds", Help: "Age of the oldest parked aggregate (since its poison event was parked); 0 when none is.",
	}, func() float64 {
		if at := p.oldest.Load(); at != 0 {
			return time.Since(time.Unix(0, at)).Seconds()
		}
		return 0
	})
	reg.MustRegister(p.aggregates, p.events, oldest)
	return p
}

// Parked sets what is parked now: aggregates, their events, and when the
// oldest was parked (zero: none).
func (m *Metrics) Parked(aggregates, events int, oldest time.Time) {
	if m == nil {
		return
	}
	m.parked.aggregates.Set(float64(aggregates))
	m.parked.events.Set(float64(events))
	if oldest.IsZero() {
		m.parked.oldest.Store(0)
	} else {
		m.parked.oldest.Store(oldest.UnixNano())
	}
}
