package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// pipelineLabel is the label every walrelay series gains in a fleet.
const pipelineLabel = "pipeline"

// gatherer serves the pipelines' registries as one: each walrelay series
// labelled pipeline=NAME, and the process's own series (Go runtime,
// process, walrelay_build_info) once, unlabelled, from the first.
type gatherer struct{ members []*member }

// processSeries says whether family name is the process's, not a
// pipeline's: every pipeline's registry has them (metrics.New), with the
// same values.
func processSeries(name string) bool {
	return !strings.HasPrefix(name, "walrelay_") || name == "walrelay_build_info"
}

func (g gatherer) Gather() ([]*dto.MetricFamily, error) {
	byName := map[string]*dto.MetricFamily{}
	var errs []error
	for i, m := range g.members {
		_, mets := m.live()
		fams, err := mets.Registry.Gather()
		if err != nil {
			errs = append(errs, fmt.Errorf("gather pipeline %s: %w", m.name, err))
		}
		for _, f := range fams {
			name := f.GetName()
			if processSeries(name) {
				if i == 0 {
					byName[name] = f
				}
				continue
			}
			label, value := pipelineLabel, m.name
			for _, s := range f.Metric {
				s.Label = append(s.Label, &dto.LabelPair{Name: &label, Value: &value})
				slices.SortFunc(s.Label, func(a, b *dto.LabelPair) int { return cmp.Compare(a.GetName(), b.GetName()) })
			}
			if have, ok := byName[name]; ok {
				have.Metric = append(have.Metric, f.Metric...)
			} else {
				byName[name] = f
			}
		}
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out, errors.Join(errs...)
}
