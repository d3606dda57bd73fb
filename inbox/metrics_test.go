package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// gather returns the registry's samples as name{label=value,...} -> value
// (a histogram: its _count).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "group" {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
			}
			sort.Strings(ls)
			k := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[k] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[k] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[k+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestCollector: the metrics of a Consumer that applied 60 records and
// skipped 15 duplicates on 3 partitions: the records by outcome, one
// latency observation per attempt, 3 partitions assigned, each at lag 0.
func TestCollector(t *testing.T) {
	f := newFixture(t, 3)
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, rec(fmt.Sprintf("k%d", i%6), fmt.Sprintf("id-%d", i), i))
		if i%4 == 0 {
			recs = append(recs, rec(fmt.Sprintf("k%d", i%6), fmt.Sprintf("id-%d", i), i))
		}
	}
	f.produce(t, recs...)
	r := start(t, f.config(record))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.c.Collector())
	var got map[string]float64
	waitFor(t, "3 partitions at lag 0 after 75 records", func() bool {
		got = gather(t, reg)
		return got[`walrelay_inbox_records_total{outcome=applied}`]+got[`walrelay_inbox_records_total{outcome=duplicate}`] == 75 &&
			got[`walrelay_inbox_partitions{}`] == 3 &&
			got[fmt.Sprintf(`walrelay_inbox_lag{partition=0,topic=%s}`, f.topic)] == 0 &&
			got[fmt.Sprintf(`walrelay_inbox_lag{partition=1,topic=%s}`, f.topic)] == 0 &&
			got[fmt.Sprintf(`walrelay_inbox_lag{partition=2,topic=%s}`, f.topic)] == 0
	})
	want := map[string]float64{
		`walrelay_inbox_records_total{outcome=applied}`:       60,
		`walrelay_inbox_records_total{outcome=duplicate}`:     15,
		`walrelay_inbox_records_total{outcome=dead_lettered}`: 0,
		`walrelay_inbox_retries_total{}`:                      0,
		`walrelay_inbox_commit_errors_total{}`:                0,
		`walrelay_inbox_handler_seconds{}_count`:              75,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	lags := 0
	for k := range got {
		if strings.HasPrefix(k, "walrelay_inbox_lag{") {
			lags++
		}
	}
	if lags != 3 {
		t.Errorf("%d lag series, want one per partition (3): %v", lags, got)
	}
}

// TestSlogLogger: the Consumer's zap lines reach a slog handler with
// their level, logger name and fields; below the handler's level they are
// dropped.
func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	log := SlogLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))).Named("inbox")
	log.Debug("not shown")
	log.With(zap.String("group", "g")).Warn("handler failed, retrying", zap.Int32("partition", 2), zap.Error(errors.New("no")))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("one JSON line expected: %q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "WARN", "msg": "handler failed, retrying", "logger": "inbox", "group": "g", "partition": float64(2), "error": "no"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, line[k], v, buf.String())
		}
	}
}
