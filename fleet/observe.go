package fleet

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Healthy reports whether every pipeline still running has its loops
// turning (/healthz); a pipeline stopped on an error is not a liveness
// failure: restarting the process would not fix it (/readyz shows it).
func (f *fleet) Healthy() (bool, string) {
	var bad []string
	for _, m := range f.members {
		if m.stopped.Load() != nil || !m.here() {
			continue
		}
		relay, _ := m.live()
		if ok, why := relay.Healthy(); !ok {
			bad = append(bad, m.name+": "+why)
		}
	}
	if len(bad) > 0 {
		return false, strings.Join(bad, "\n")
	}
	return true, ""
}

// Ready reports whether every pipeline this replica runs streams
// (/readyz); if not, it names each one that does not, one a line, with
// why. /readyz/NAME is one pipeline's (readyz.go).
func (f *fleet) Ready() (bool, string) {
	var bad []string
	if f.group != nil && !f.group.joined.Load() {
		return false, "not ready: joining group " + f.group.name
	}
	for _, m := range f.members {
		if !m.here() {
			continue
		}
		if ok, why := f.readyPipeline(m); !ok {
			bad = append(bad, strings.TrimPrefix(why, "not ready: "))
		}
	}
	bad = append(bad, f.inflightWaits()...) // budget.go
	if len(bad) > 0 {
		return false, "not ready: " + strings.Join(bad, "\n")
	}
	return true, ""
}

// Status is one pipeline in /pipelines.
type Status struct {
	Name string `json:"name"`
	// State is walrelay_state's (starting, waiting_for_slot, streaming,
	// restarting, stopping), or stopped once the pipeline has stopped on
	// an error; elsewhere when the fleet's group runs it on another
	// replica (docs/fleet.md).
	State string `json:"state"`
	// Owner is the replica that runs the pipeline in a group
	// (--fleet-instance), this one's; "" outside a group and elsewhere.
	Owner string `json:"owner,omitempty"`
	// Ready is the pipeline's /readyz.
	Ready bool   `json:"ready"`
	Slot  string `json:"slot"`
	// SlotLagBytes is walrelay_slot_lag_bytes.
	SlotLagBytes float64 `json:"slot_lag_bytes"`
	// EventsPublished is walrelay_events_published_total over every
	// topic; EventsPerSecond its rate over the last minute, to 0.01.
	EventsPublished float64 `json:"events_published"`
	EventsPerSecond float64 `json:"events_per_second"`
	// OldestUnackedSeconds is walrelay_oldest_unacked_seconds.
	OldestUnackedSeconds float64 `json:"oldest_unacked_seconds"`
	// LastError is what stopped the pipeline, or the last failure it
	// restarted after; "" when none.
	LastError string `json:"last_error"`
}

// servePipelines answers /pipelines: a JSON list of Status, in the
// file's order.
func (f *fleet) servePipelines(w http.ResponseWriter, _ *http.Request) {
	out := f.statuses()
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}

// statuses is each pipeline's Status, in the file's order (/pipelines,
// the status page).
func (f *fleet) statuses() []Status {
	out := make([]Status, 0, len(f.members))
	for _, m := range f.members {
		v := m.values()
		relay, mets := m.live()
		s := Status{Name: m.name, State: mets.State(), Slot: m.slot, SlotLagBytes: v[lagMetric],
			EventsPublished: v[publishedMetric], EventsPerSecond: math.Round(100*m.rate.perSecond(v[publishedMetric], time.Now())) / 100,
			OldestUnackedSeconds: v[oldestMetric], LastError: relay.LastError()}
		s.Ready, _ = relay.Ready()
		if o := m.owner.Load(); o != nil {
			s.Owner = *o
		}
		if !m.here() {
			s.State, s.Ready = stateElsewhere, false
		} else if e := m.stopped.Load(); e != nil {
			s.State, s.Ready, s.LastError = "stopped", false, *e
		}
		out = append(out, s)
	}
	return out
}

// The series /pipelines reads.
const (
	lagMetric       = "walrelay_slot_lag_bytes"
	publishedMetric = "walrelay_events_published_total"
	oldestMetric    = "walrelay_oldest_unacked_seconds"
	parkedMetric    = "walrelay_parked_aggregates" // the status page's
)

// values gathers m's registry and sums each series /pipelines reads.
func (m *member) values() map[string]float64 {
	out := map[string]float64{}
	_, mets := m.live()
	fams, _ := mets.Registry.Gather()
	for _, f := range fams {
		switch f.GetName() {
		case lagMetric, publishedMetric, oldestMetric, parkedMetric:
			for _, s := range f.GetMetric() {
				out[f.GetName()] += seriesValue(s)
			}
		}
	}
	return out
}

func seriesValue(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	}
	return 0
}

// rateEvery is how often the published count is sampled; rateWindow how
// far back the rate looks.
const (
	rateEvery  = 5 * time.Second
	rateWindow = time.Minute
)

// sample records each running pipeline's published count.
func (f *fleet) sample() {
	now := time.Now()
	for _, m := range f.members {
		n := m.values()[publishedMetric]
		m.rate.add(now, n)
		m.history.add(now, n)
	}
}

// rate is the samples of a count over the last rateWindow.
type rate struct {
	mu      sync.Mutex
	samples []sample
}

type sample struct {
	at    time.Time
	count float64
}

func (r *rate) add(at time.Time, count float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, sample{at, count})
	for len(r.samples) > 1 && at.Sub(r.samples[0].at) > rateWindow {
		r.samples = r.samples[1:]
	}
}

// perSecond is the rate from the oldest sample to count, now.
func (r *rate) perSecond(count float64, now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return 0
	}
	first := r.samples[0]
	if dt := now.Sub(first.at).Seconds(); dt > 0 {
		return max(0, count-first.count) / dt
	}
	return 0
}
