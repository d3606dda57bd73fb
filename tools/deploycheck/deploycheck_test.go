package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoRoot is walrelay's repository, from this package's directory.
var repoRoot = filepath.Join("..", "..")

var (
	chartDir   = filepath.Join(repoRoot, "deploy", "helm", "walrelay")
	examples   = filepath.Join(repoRoot, "deploy", "kubernetes")
	fleetPlain = filepath.Join(examples, "walrelay-fleet.yaml")
)

// release is the release name the examples are rendered with: its objects
// are named walrelay, as deploy/kubernetes's.
const release = "walrelay"

// updateEnv, set to 1, makes TestFleetExampleIsTheChart write
// deploy/kubernetes/walrelay-fleet.yaml from the chart instead of
// comparing.
const updateEnv = "WALRELAY_UPDATE_FLEET_EXAMPLE"

// checker reads the schemas TestMain wrote.
var checker *Validator

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deploycheck-schemas-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploycheck:", err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		goCmd := os.Getenv("GO")
		if goCmd == "" {
			goCmd = "go"
		}
		loc, err := Schemas(goCmd, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "deploycheck: write the Kubernetes schemas:", err)
			return 1
		}
		if checker, err = NewValidator(loc); err != nil {
			fmt.Fprintln(os.Stderr, "deploycheck:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// valuesFiles are the chart's ci/ values files, each a form of the chart.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("%s/ci: %d values files (%v), want single, fleet and fleet with TLS and SASL at least", chartDir, len(files), err)
	}
	return files
}

// validate fails t for every object of ms that kubeconform refuses, and
// returns the objects' KIND/NAME.
func validate(t *testing.T, ms []Manifest) []string {
	t.Helper()
	var objs []string
	for _, m := range ms {
		vs := checker.Validate(m)
		if len(vs) == 0 {
			t.Errorf("%s: no object", m.Name)
		}
		for _, v := range vs {
			objs = append(objs, v.Object)
			if v.Err != nil {
				t.Errorf("%s: %s: %v", m.Name, v.Object, v.Err)
			}
		}
	}
	slices.Sort(objs)
	return objs
}

// TestChart renders the chart for each values file of its ci/ directory
// and validates every rendered object against the Kubernetes schemas.
func TestChart(t *testing.T) {
	for _, f := range valuesFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), "-values.yaml"), func(t *testing.T) {
			ms, err := Render(chartDir, release, f)
			if err != nil {
				t.Fatal(err)
			}
			objs := validate(t, ms)
			t.Logf("%s: %d objects validated: %v", filepath.Base(f), len(objs), objs)
			fleet := strings.HasPrefix(filepath.Base(f), "fleet")
			want := []string{"Deployment/walrelay", "Service/walrelay-metrics"}
			if fleet {
				want = append(want, "ConfigMap/walrelay", "PodDisruptionBudget/walrelay")
			}
			for _, w := range want {
				if !slices.Contains(objs, w) {
					t.Errorf("no %s among %v", w, objs)
				}
			}
			if !fleet && slices.Contains(objs, "PodDisruptionBudget/walrelay") {
				t.Errorf("a PodDisruptionBudget in single mode: one pod is ready by design, a budget blocks draining its node")
			}
		})
	}
}

// TestKubernetesExamples validates every manifest of deploy/kubernetes.
func TestKubernetesExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examples, "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("deploy/kubernetes: %v %v, want the single and the fleet example", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs := validate(t, []Manifest{{Name: f, Data: data}})
		t.Logf("%s: %d objects validated: %v", filepath.Base(f), len(objs), objs)
	}
}

// TestFleetExampleIsTheChart: deploy/kubernetes/walrelay-fleet.yaml is what
// the chart renders with ci/fleet-values.yaml (mode: fleet, every other
// value the default), object for object (comments aside).
func TestFleetExampleIsTheChart(t *testing.T) {
	ms, err := Render(chartDir, release, filepath.Join(chartDir, "ci", "fleet-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(updateEnv) == "1" {
		writeFleetExample(t, ms)
	}
	var rendered []byte
	for _, m := range ms {
		rendered = append(rendered, "---\n"...)
		rendered = append(rendered, m.Data...)
	}
	want := objects(t, "the chart", rendered)
	data, err := os.ReadFile(fleetPlain)
	if err != nil {
		t.Fatal(err)
	}
	got := objects(t, fleetPlain, data)
	if len(got) != len(want) {
		t.Fatalf("%s has %d objects, the chart renders %d: run %s=1 go test -run TestFleetExampleIsTheChart ./ in tools/deploycheck", fleetPlain, len(got), len(want), updateEnv)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := yaml.Marshal(got[i])
			w, _ := yaml.Marshal(want[i])
			t.Errorf("%s object %d differs from the chart's rendering (%s=1 go test -run TestFleetExampleIsTheChart ./ in tools/deploycheck writes it):\n--- file:\n%s\n--- chart:\n%s", fleetPlain, i+1, updateEnv, g, w)
		}
	}
}

// objects decodes every non-empty document of a YAML stream.
func objects(t *testing.T, where string, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i, doc := range strings.Split("\n"+string(data), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s document %d: %v", where, i+1, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// writeFleetExample writes the chart's fleet rendering as
// deploy/kubernetes/walrelay-fleet.yaml, with its header.
func writeFleetExample(t *testing.T, ms []Manifest) {
	t.Helper()
	header, err := os.ReadFile(filepath.Join("testdata", "fleet-example-header.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := header
	for _, m := range ms {
		out = append(out, "---\n# Source: "+m.Name+"\n"...)
		out = append(out, strings.TrimLeft(string(m.Data), "\n")...)
		if !strings.HasSuffix(string(out), "\n") {
			out = append(out, '\n')
		}
	}
	if err := os.WriteFile(fleetPlain, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", fleetPlain)
}

// TestValidatorRejects proves the check can fail: each manifest of
// testdata/broken holds one mistake (named in its first line) that the
// validator must refuse, while testdata/valid.yaml, the same objects
// without the mistakes, passes.
func TestValidatorRejects(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range checker.Validate(Manifest{Name: "valid.yaml", Data: good}) {
		if v.Err != nil {
			t.Errorf("testdata/valid.yaml: %s: %v", v.Object, v.Err)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "broken", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/broken: no manifest (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, _, _ := strings.Cut(strings.TrimPrefix(string(data), "# want: "), "\n")
			vs := checker.Validate(Manifest{Name: f, Data: data})
			if len(vs) != 1 {
				t.Fatalf("%d verdicts, want 1", len(vs))
			}
			if vs[0].Err == nil {
				t.Fatalf("%s: accepted; want refused with %q", vs[0].Object, want)
			}
			if !strings.Contains(vs[0].Err.Error(), want) {
				t.Errorf("%s: %v; want it to say %q", vs[0].Object, vs[0].Err, want)
			}
			t.Logf("refused: %v", vs[0].Err)
		})
	}
}

// TestChartMistakeFailsTheCheck: a misspelled field that reaches the
// rendered manifest through the values (podSecurityContext is copied as it
// is) fails the validation of the chart's rendering.
func TestChartMistakeFailsTheCheck(t *testing.T) {
	ms, err := Render(chartDir, release, filepath.Join(chartDir, "ci", "fleet-values.yaml"), filepath.Join("testdata", "misspelled-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, m := range ms {
		for _, v := range checker.Validate(m) {
			if v.Err != nil {
				refused = append(refused, v.Object+": "+v.Err.Error())
			}
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "runAsNonRot") {
		t.Fatalf("refused %q; want the Deployment, for runAsNonRot", refused)
	}
	t.Logf("refused: %s", refused[0])
}

// TestChartLint runs helm lint (Helm's linter, as `helm lint --strict -f
// VALUES`) for each values file: no warning, no error.
func TestChartLint(t *testing.T) {
	for _, f := range valuesFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), "-values.yaml"), func(t *testing.T) {
			if msgs := Lint(chartDir, f); len(msgs) > 0 {
				t.Errorf("helm lint -f %s:\n%s", f, strings.Join(msgs, "\n"))
			}
		})
	}
}

// TestValuesSchemaRefuses: the chart's values.schema.json refuses a
// misspelled value (replica for replicas), which the templates would
// otherwise ignore.
func TestValuesSchemaRefuses(t *testing.T) {
	_, err := Render(chartDir, release, filepath.Join("testdata", "typo-values.yaml"))
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("rendered with testdata/typo-values.yaml: %v; want refused for replica", err)
	}
	t.Logf("refused: %v", err)
	if msgs := Lint(chartDir, filepath.Join("testdata", "typo-values.yaml")); len(msgs) == 0 {
		t.Errorf("helm lint -f testdata/typo-values.yaml: no message; want the schema's refusal")
	}
}
