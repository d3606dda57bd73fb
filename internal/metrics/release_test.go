package metrics

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var updateRelease = flag.Bool("update-release", false, "rewrite testdata/metrics-release.txt from this tree (only when cutting a release)")

// TestMetricSetMatchesPreviousRelease: the metrics walrelay registers, name
// and labels, are those of the previous release (8e87de4), captured in
// testdata/metrics-release.txt from that release's registry: a dashboard or
// alert written against it keeps working. A metric may be added by
// appending it to the file; none may disappear or change its labels.
func TestMetricSetMatchesPreviousRelease(t *testing.T) {
	// N.B. as walrelay run builds it: every gauge read from the pipeline
	// and the build info.
	m := New()
	f := func() float64 { return 0 }
	m.ReadFrom(Gauges{InflightEvents: f, InflightBytes: f, OldestUnackedSeconds: f, ReceivedLSN: f, ConfirmedLSN: f, ServerWALEndLSN: f, Ready: f})
	m.SetBuildInfo("test", "go")
	got := describe(m.Registry)
	const path = "testdata/metrics-release.txt"
	if *updateRelease {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("the previous release exported %s; this tree does not", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("this tree exports %s, which the previous release did not (new metrics go into %s too)", g, path)
		}
	}
	if len(want) < 20 {
		t.Fatalf("%s lists %d metrics: it is not the release's set", path, len(want))
	}
}

// describe lists each metric of reg as "name{label,...}", sorted.
func describe(reg *prometheus.Registry) []string {
	ch := make(chan *prometheus.Desc, 256)
	go func() { reg.Describe(ch); close(ch) }()
	var out []string
	for d := range ch {
		s := d.String()
		name := between(s, `fqName: "`, `"`)
		labels := between(s, "variableLabels: {", "}")
		out = append(out, name+"{"+labels+"}")
	}
	slices.Sort(out)
	return out
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}
