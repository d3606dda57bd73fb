package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// failoverGauges are registered at their first use: walrelay_failover_ready
// only when walrelay watches a standby (--pg-standby-url), so that it is
// absent rather than 0 without one.
type failoverGauges struct {
	readyOnce sync.Once
	ready     prometheus.Gauge
}

// SetFailoverReady sets walrelay_failover_ready: 1 while the standby named
// by --pg-standby-url holds a synchronized, valid, persistent copy of the
// slot.
func (m *Metrics) SetFailoverReady(ready bool) {
	if m == nil {
		return
	}
	m.failover.readyOnce.Do(func() {
		m.failover.ready = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_failover_ready",
			Help: "1 while the standby named by --pg-standby-url holds a synchronized, valid, non-temporary copy of the slot (a promotion of it keeps the slot); absent without --pg-standby-url.",
		})
		m.Registry.MustRegister(m.failover.ready)
	})
	m.failover.ready.Set(b2f(ready))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
