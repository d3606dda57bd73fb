package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReadInflightWait registers walrelay_inflight_process_wait_seconds, read
// from wait: in a fleet (walrelay run --config) with a process-wide
// max-inflight-bytes, how long the pipeline has been waiting for room
// under it (0 when it does not wait). A single pipeline has no such series.
func (m *Metrics) ReadInflightWait(wait func() float64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walrelay_inflight_process_wait_seconds",
		Help: "How long the pipeline has been waiting for room under the process's max-inflight-bytes (walrelay run --config), beyond its reserved share; 0 when it does not wait.",
	}, wait))
}
