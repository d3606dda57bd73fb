package metrics

import (
	"fmt"
	"testing"
	"time"
)

// TestPublishedTopicSeriesAreBounded: records to many more topics than
// MaxTopicSeries give at most MaxTopicSeries+1 series of
// walrelay_events_published_total, the first topics with their own, the
// rest under OtherTopic, and no record goes uncounted.
func TestPublishedTopicSeriesAreBounded(t *testing.T) {
	m := New()
	const topics, each = 3 * MaxTopicSeries, 2
	for round := 0; round < each; round++ {
		for i := 0; i < topics; i++ {
			m.Published(fmt.Sprintf("outbox.event.t%d", i), time.Now(), time.Now())
		}
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series, total := map[string]float64{}, 0.0
	for _, f := range families {
		if f.GetName() != "walrelay_events_published_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "topic" {
					series[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
			total += s.GetCounter().GetValue()
		}
	}
	if len(series) != MaxTopicSeries+1 {
		t.Errorf("%d topic series, want %d (MaxTopicSeries and %q)", len(series), MaxTopicSeries+1, OtherTopic)
	}
	if total != topics*each {
		t.Errorf("%v records counted, want %d", total, topics*each)
	}
	if got := series["outbox.event.t0"]; got != each {
		t.Errorf("first topic counted %v, want %d under its own name", got, each)
	}
	if got, want := series[OtherTopic], float64((topics-MaxTopicSeries)*each); got != want {
		t.Errorf("%s counted %v, want %v", OtherTopic, got, want)
	}
}
