package deploycheck

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/yaml"
)

// Manifest is one rendered file of a chart, or a manifest file.
type Manifest struct {
	// Name is the template's path in the chart, or the file's.
	Name string
	Data []byte
}

// Render renders the chart in dir as `helm template RELEASE dir -f
// VALUES...` would (release namespace default, the capabilities of
// KubernetesVersion), the values checked against the chart's
// values.schema.json. It returns the rendered manifests in name order,
// without NOTES.txt and files that render empty.
func Render(dir, release string, valuesFiles ...string) ([]Manifest, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	vals := map[string]any{}
	for _, f := range valuesFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		vals = util.MergeTables(v, vals)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = common.KubeVersion{Version: "v" + KubernetesVersion, Major: "1", Minor: strings.Split(KubernetesVersion, ".")[1]}
	opts := common.ReleaseOptions{Name: release, Namespace: "default", Revision: 1, IsInstall: true}
	rv, err := util.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return nil, fmt.Errorf("values of %s: %w", dir, err)
	}
	e := engine.Engine{Strict: true}
	files, err := e.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	var out []Manifest
	for name, data := range files {
		if path.Base(name) == "NOTES.txt" || strings.HasPrefix(path.Base(name), "_") || strings.TrimSpace(data) == "" {
			continue
		}
		out = append(out, Manifest{Name: name, Data: []byte(data)})
	}
	slices.SortFunc(out, func(a, b Manifest) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
