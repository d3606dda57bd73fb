package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Gauges are read from the running pipeline at each scrape. The pipeline
// gives the functions; the names are here.
type Gauges struct {
	// InflightEvents: events produced and not yet acknowledged.
	InflightEvents func() float64
	// InflightBytes: bytes counted against --max-inflight-bytes.
	InflightBytes func() float64
	// OldestUnackedSeconds: age of the oldest transaction not yet fully
	// acknowledged.
	OldestUnackedSeconds func() float64
	// ReceivedLSN, ConfirmedLSN, ServerWALEndLSN: stream positions.
	ReceivedLSN     func() float64
	ConfirmedLSN    func() float64
	ServerWALEndLSN func() float64
	// Ready: 1 while the instance is ready (/readyz), else 0.
	Ready func() float64
}

// ReadFrom registers g's functions as gauges. Call it once per Metrics; a
// nil function is not registered.
func (m *Metrics) ReadFrom(g Gauges) {
	if m == nil {
		return
	}
	for _, d := range []struct {
		name, help string
		f          func() float64
	}{
		{"walrelay_inflight_events", "Events produced and not yet acknowledged by Kafka.", g.InflightEvents},
		{"walrelay_inflight_bytes", "Bytes counted against --max-inflight-bytes: records buffered in the Kafka client or in flight, each with its key, value, headers and 1 KiB of overhead.", g.InflightBytes},
		{"walrelay_oldest_unacked_seconds", "Age of the oldest transaction not yet fully acknowledged by Kafka.", g.OldestUnackedSeconds},
		{"walrelay_received_lsn", "WAL start of the last message received (bytes).", g.ReceivedLSN},
		{"walrelay_confirmed_lsn", "Flush position last confirmed to PostgreSQL (bytes).", g.ConfirmedLSN},
		{"walrelay_server_wal_end_lsn", "Server WAL end from the last keepalive (bytes).", g.ServerWALEndLSN},
		{"walrelay_ready", "1 while this instance holds the slot, streams, and Kafka answers.", g.Ready},
	} {
		if d.f != nil {
			m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: d.name, Help: d.help}, d.f))
		}
	}
}

// TransactionCount is walrelay_transactions_total's value.
func (m *Metrics) TransactionCount() uint64 {
	if m == nil {
		return 0
	}
	var v dto.Metric
	if m.Transactions.Write(&v) != nil {
		return 0
	}
	return uint64(v.GetCounter().GetValue())
}
