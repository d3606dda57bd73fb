package metrics

import "testing"

// TestFailoverGaugesAbsentUntilSet: walrelay_failover_ready and
// walrelay_stream_held_back are absent until first set (no standby watched:
// no series, not a 0), then follow every set.
func TestFailoverGaugesAbsentUntilSet(t *testing.T) {
	m := New()
	value := func(name string) (float64, bool) {
		t.Helper()
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				return f.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	for _, g := range []struct {
		name string
		set  func(bool)
	}{
		{"walrelay_failover_ready", m.SetFailoverReady},
		{"walrelay_stream_held_back", m.SetHeldBack},
	} {
		if v, ok := value(g.name); ok {
			t.Errorf("%s = %v before it was set, want absent", g.name, v)
		}
		for _, on := range []bool{true, false, true} {
			g.set(on)
			want := 0.0
			if on {
				want = 1
			}
			if v, ok := value(g.name); !ok || v != want {
				t.Errorf("%s = %v (present %v) after set(%v), want %v", g.name, v, ok, on, want)
			}
		}
	}
	var nilMetrics *Metrics
	nilMetrics.SetFailoverReady(true) // a relay without metrics: no panic
	nilMetrics.SetHeldBack(true)
}
