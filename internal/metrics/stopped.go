package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReadStopped registers walrelay_pipeline_stopped, read from stopped: in a
// fleet (walrelay run --config) 1 once the pipeline has stopped on an
// error while the others go on. A single pipeline exits instead and has
// no such series.
func (m *Metrics) ReadStopped(stopped func() float64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walrelay_pipeline_stopped",
		Help: "1 once the pipeline has stopped on an error (its slot lost, a setup to fix, --on-poison halt) while the other pipelines of the process go on (walrelay run --config); /pipelines and /readyz say why.",
	}, stopped))
}
