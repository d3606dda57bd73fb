package fleet

import (
	"testing"

	"github.com/walrelay/walrelay/internal/metrics"
)

// TestGatherLabelsEachPipeline: every walrelay series of each pipeline
// carries pipeline=NAME; the process's series (Go, process, build info)
// are there once, without it.
func TestGatherLabelsEachPipeline(t *testing.T) {
	var ms []*member
	for _, name := range []string{"orders", "billing"} {
		m := metrics.New()
		m.SetBuildInfo("v1", "go")
		m.ReadStopped(func() float64 { return 0 })
		ms = append(ms, &member{name: name, metrics: m})
	}
	ms[1].metrics.Transactions.Add(3)
	fams, err := gatherer{ms}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range fams {
		name := f.GetName()
		seen[name]++
		pipelines := map[string]bool{}
		for _, s := range f.GetMetric() {
			var pipeline string
			for _, l := range s.GetLabel() {
				if l.GetName() == pipelineLabel {
					pipeline = l.GetValue()
				}
			}
			pipelines[pipeline] = true
			switch {
			case processSeries(name) && pipeline != "":
				t.Errorf("%s has pipeline=%s, want none (the process's)", name, pipeline)
			case !processSeries(name) && pipeline == "":
				t.Errorf("%s has no pipeline label", name)
			case name == "walrelay_transactions_total" && pipeline == "billing" && s.GetCounter().GetValue() != 3:
				t.Errorf("walrelay_transactions_total{pipeline=billing} = %v, want 3", s.GetCounter().GetValue())
			}
		}
		if !processSeries(name) && (!pipelines["orders"] || !pipelines["billing"]) {
			t.Errorf("%s has series of pipelines %v, want orders and billing", name, pipelines)
		}
	}
	for _, name := range []string{"walrelay_build_info", "go_goroutines", "walrelay_state", "walrelay_pipeline_stopped"} {
		if seen[name] != 1 {
			t.Errorf("family %s gathered %d times, want once", name, seen[name])
		}
	}
}
