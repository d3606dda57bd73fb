package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// failoverGauges are registered at their first use: walrelay_failover_ready
// only when walrelay watches a standby (--pg-standby-url), so that it is
// absent rather than 0 without one.
type failoverGauges struct {
	ready, held, checkpointWait lazyGauge
}

// lazyGauge is a 0/1 gauge registered the first time it is set.
type lazyGauge struct {
	once sync.Once
	g    prometheus.Gauge
}

func (l *lazyGauge) set(reg prometheus.Registerer, opts prometheus.GaugeOpts, on bool) {
	l.once.Do(func() {
		l.g = prometheus.NewGauge(opts)
		reg.MustRegister(l.g)
	})
	l.g.Set(b2f(on))
}

// SetFailoverReady sets walrelay_failover_ready: 1 while the standby named
// by --pg-standby-url holds a synchronized, valid, persistent copy of the
// slot.
func (m *Metrics) SetFailoverReady(ready bool) {
	if m == nil {
		return
	}
	m.failover.ready.set(m.Registry, prometheus.GaugeOpts{
		Name: "walrelay_failover_ready",
		Help: "1 while the standby named by --pg-standby-url holds a synchronized, valid, non-temporary copy of the slot (a promotion of it keeps the slot); absent without --pg-standby-url.",
	}, ready)
}

// SetHeldBack sets walrelay_stream_held_back: 1 while PostgreSQL holds the
// stream back for a standby named in synchronized_standby_slots that does
// not confirm (pipeline's held-back detection).
func (m *Metrics) SetHeldBack(held bool) {
	if m == nil {
		return
	}
	m.failover.held.set(m.Registry, prometheus.GaugeOpts{
		Name: "walrelay_stream_held_back",
		Help: "1 while PostgreSQL holds the logical stream back waiting for a physical slot named in synchronized_standby_slots that no standby confirms (missing, inactive or invalidated): fix the setting (docs/failover.md).",
	}, held)
}

// SetCheckpointWaiting sets walrelay_checkpoint_read_waiting: 1 while the
// exactly-once checkpoint read waits for undecided Kafka transactions on
// the checkpoint topic.
func (m *Metrics) SetCheckpointWaiting(on bool) {
	if m == nil {
		return
	}
	m.failover.checkpointWait.set(m.Registry, prometheus.GaugeOpts{
		Name: "walrelay_checkpoint_read_waiting",
		Help: "1 while --exactly-once waits, before it reads its checkpoint, for Kafka transactions on the checkpoint topic to be decided (another pipeline's, or a stopped producer's until the broker aborts it at its transaction timeout); absent until it first waits.",
	}, on)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
