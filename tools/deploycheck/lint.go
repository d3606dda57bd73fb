package deploycheck

import (
	"os"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"sigs.k8s.io/yaml"
)

// Lint runs Helm's linter on the chart in dir with the values of
// valuesFile, as `helm lint --strict -f valuesFile dir` does, and returns
// its warnings and errors.
func Lint(dir, valuesFile string) []string {
	data, err := os.ReadFile(valuesFile)
	if err != nil {
		return []string{err.Error()}
	}
	var vals map[string]any
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return []string{valuesFile + ": " + err.Error()}
	}
	l := lint.RunAll(dir, vals, "default", lint.WithKubeVersion(&common.KubeVersion{Version: "v" + KubernetesVersion, Major: "1", Minor: "37"}))
	var out []string
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m.Error())
		}
	}
	return out
}
