package fleet

import (
	"flag"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/pipeline"
)

// testPipeline is `walrelay run`'s flag set as far as package pipeline
// defines it, plus the process-wide flags cmd/walrelay adds.
func testPipeline() (*flag.FlagSet, func() (pipeline.Config, []string, error)) {
	var s pipeline.Settings
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	s.RegisterFlags(fs)
	var ignored string
	for _, name := range []string{"http-addr", "http-idle-timeout", "http-max-connections", "http-pprof", "log-level", "log-format", configFlag} {
		fs.StringVar(&ignored, name, "", "")
	}
	return fs, s.Config
}

func TestLoad(t *testing.T) {
	const good = `brokers: k1:9092,k2:9092
defaults:
  publication: outbox_pub
  status-interval: 2s
pipelines:
  - name: orders
    pg-url: postgres://localhost/orders
    slot: orders
  - name: billing
    pg-url: postgres://localhost/billing
    slot: billing
    table: [public.outbox, public.outbox2]
`
	for _, tc := range []struct {
		name, file string
		args       []string
		want       []string // one fragment per mistake, in order; none: no mistake
	}{
		{name: "good", file: good},
		{name: "slot on the command line", file: good, args: []string{"--slot", "x"},
			want: []string{`--slot is given with --config (on the command line or as WALRELAY_SLOT): set slot: under defaults: or under a pipeline`}},
		{name: "brokers on the command line win", file: good, args: []string{"--brokers", "k9:9092"}},
		{name: "mistakes everywhere", file: `brokers: k1:9092
slot: s
bogus: 1
defaults:
  status-interval: 30
  log-level: debug
pipelines:
  - name: orders
    pg-url: postgres://localhost/orders
    slot: same
    on-poison: ignore
  - name: billing
    pg-url: postgres://localhost/orders
    slot: same
    publicaton: x
    slot: again
  - name: orders
    pg-url: postgres://localhost/x
  - pg-url: postgres://localhost/y
`, want: []string{
			`:2: slot: is a pipeline's setting`,
			`:3: bogus: no such setting`,
			`:5: status-interval: "30": want a duration with a unit`,
			`:6: log-level: is process-wide`,
			`:11: pipeline "orders": on-poison "ignore": want dead-letter, park or halt`,
			`:14: pipeline "billing": slot "same" of database "orders" on localhost:5432 is also pipeline "orders"'s (line 8)`,
			`:15: pipeline "billing": publicaton: no such setting: did you mean publication?`,
			`:16: pipeline "billing": slot: set twice (first at line 14)`,
			`:17: pipeline "orders": name: "orders" is also the name of the pipeline at line 8`,
			`:19: pipelines: item 4 has no name`,
		}},
		{name: "anchors", file: `brokers: k1:9092,k2:9092
defaults:
  publication: &pub outbox_pub
  status-interval: 2s
pipelines:
  - name: orders
    pg-url: postgres://localhost/orders
    slot: orders
  - name: billing
    pg-url: postgres://localhost/billing
    slot: billing
    publication: *pub
    table: [public.outbox, public.outbox2]
`},
		{name: "merge keys", file: "pipelines:\n  - name: a\n    pg-url: postgres://localhost/a\n    <<: {slot: x}\n", want: []string{`:4: pipeline "a": <<: merge keys are not read`}},
		{name: "no pipelines", file: "brokers: k:1\n", want: []string{`:1: no pipelines: list at least one`}},
		{name: "not yaml", file: "pipelines: [\n", want: []string{`did not find expected node content`}},
		{name: "a mapping as a value", file: "pipelines:\n  - name: a\n    slot: {x: 1}\n", want: []string{`:2: pipeline "a": no PostgreSQL connection string`, `:3: pipeline "a": slot: want a value`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, _ := testPipeline()
			if err := top.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			plans, ms := load([]byte(tc.file), top, testPipeline)
			got := strings.Split(strings.TrimSpace(format("f.yaml", ms)), "\n")
			if len(ms) == 0 {
				got = nil
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d mistakes, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("mistake %d: %s\nwant it to contain %s", i+1, got[i], w)
				}
			}
			if tc.want == nil {
				if len(plans) != 2 || plans[1].cfg.Replication.Slot != "billing" || plans[0].cfg.Replication.Publication != "outbox_pub" ||
					strings.Join(plans[1].cfg.Decode.Tables, ",") != "public.outbox,public.outbox2" {
					t.Errorf("plans: %+v", plans)
				}
				brokers := "k1:9092,k2:9092"
				if len(tc.args) > 0 {
					brokers = "k9:9092"
				}
				if got := strings.Join(plans[0].cfg.Sink.Brokers, ","); got != brokers {
					t.Errorf("brokers %s, want %s", got, brokers)
				}
			}
		})
	}
}
