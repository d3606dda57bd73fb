package metrics

import "testing"

// TestReadFrom: the pipeline's functions are read at each scrape under the
// names fixed here.
func TestReadFrom(t *testing.T) {
	m := New()
	n := 0.0
	m.ReadFrom(Gauges{
		InflightEvents:       func() float64 { return 1 },
		InflightBytes:        func() float64 { return 2 },
		OldestUnackedSeconds: func() float64 { return 3 },
		ReceivedLSN:          func() float64 { return 4 },
		ConfirmedLSN:         func() float64 { return 5 },
		ServerWALEndLSN:      func() float64 { return 6 },
		Ready:                func() float64 { n++; return n },
	})
	want := map[string]float64{
		"walrelay_inflight_events": 1, "walrelay_inflight_bytes": 2, "walrelay_oldest_unacked_seconds": 3,
		"walrelay_received_lsn": 4, "walrelay_confirmed_lsn": 5, "walrelay_server_wal_end_lsn": 6, "walrelay_ready": 1,
	}
	for scrape := 1; scrape <= 2; scrape++ {
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			if _, ok := want[f.GetName()]; ok {
				got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		want["walrelay_ready"] = float64(scrape)
		for name, v := range want {
			if g, ok := got[name]; !ok || g != v {
				t.Errorf("scrape %d: %s = %v (registered %v), want %v", scrape, name, g, ok, v)
			}
		}
	}
	m.Transactions.Add(3)
	if c := m.TransactionCount(); c != 3 {
		t.Errorf("TransactionCount = %d, want 3", c)
	}
}
