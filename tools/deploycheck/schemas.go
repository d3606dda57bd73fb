package deploycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// KubernetesVersion is the Kubernetes release whose schemas the manifests
// are validated against: the one of the k8s.io modules Helm v4.3.2 is built
// with (k8s.io/api v0.37.2).
const KubernetesVersion = "1.37.2"

// source is a module of the Go module proxy that holds a spec, pinned by
// its sum (go.sum's h1: hash of the module's files).
type source struct {
	module, version, sum string
}

var (
	// kubernetesSpec holds api/openapi-spec/swagger.json, the OpenAPI v2
	// spec of every built-in kind.
	kubernetesSpec = source{"k8s.io/kubernetes", "v" + KubernetesVersion, "h1:A2VDEiObzkYqFTKhSsn0ZEb0RlLEXpHWj93gi2HqEwE="}
	// operatorSpec holds the CustomResourceDefinition of ServiceMonitor.
	operatorSpec = source{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="}
)

// operatorCRDs are the CustomResourceDefinitions of operatorSpec the chart
// may render.
var operatorCRDs = []string{"example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"}

// download fetches s into the module cache (once; afterwards from the
// cache) and returns its directory, refusing one whose sum is not the
// pinned one.
func download(goCmd string, s source) (string, error) {
	cmd := exec.Command(goCmd, "mod", "download", "-json", s.module+"@"+s.version)
	// N.B. outside any module: nothing is added to a go.mod or go.sum.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil && err == nil {
		err = jerr
	}
	if m.Error != "" {
		err = fmt.Errorf("%s", m.Error)
	}
	if err != nil {
		return "", fmt.Errorf("download %s@%s: %w %s", s.module, s.version, err, strings.TrimSpace(stderr.String()))
	}
	if m.Sum != s.sum {
		return "", fmt.Errorf("download %s@%s: sum %s, want %s (pinned in tools/deploycheck)", s.module, s.version, m.Sum, s.sum)
	}
	return m.Dir, nil
}

// Schemas writes the JSON schemas of every built-in kind of
// KubernetesVersion and of the CustomResourceDefinitions the chart may
// render under dir, in kubeconform's layout, and returns kubeconform's
// schema location template for them. goCmd is the go command.
func Schemas(goCmd, dir string) (string, error) {
	out := filepath.Join(dir, "v"+KubernetesVersion+"-standalone-strict")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	k8s, err := download(goCmd, kubernetesSpec)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(k8s, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		return "", err
	}
	if err := writeKubernetes(out, data); err != nil {
		return "", err
	}
	op, err := download(goCmd, operatorSpec)
	if err != nil {
		return "", err
	}
	for _, f := range operatorCRDs {
		data, err := os.ReadFile(filepath.Join(op, f))
		if err != nil {
			return "", err
		}
		if err := writeCRD(out, data); err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
	}
	return filepath.Join(dir, "{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"), nil
}

// object is a JSON object of a schema.
type object = map[string]any

// writeKubernetes converts an OpenAPI v2 spec into one standalone schema per
// kind (what kubeconform's schemas are, made by openapi2jsonschema
// --kubernetes --stand-alone --strict): the kind's definition with every
// definition it refers to under $defs, objects closed (strict),
// apiVersion and kind fixed.
func writeKubernetes(dir string, spec []byte) error {
	var s struct {
		Definitions map[string]object `json:"definitions"`
	}
	if err := json.Unmarshal(spec, &s); err != nil {
		return fmt.Errorf("read swagger.json: %w", err)
	}
	n := 0
	for name, def := range s.Definitions {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk := g.(object)
			group, version, kind := gvk["group"].(string), gvk["version"].(string), gvk["kind"].(string)
			if _, ok := def["properties"].(object)["apiVersion"]; !ok {
				continue // a kind without apiVersion (e.g. DeleteOptions as a body): no manifest
			}
			apiVersion := version
			if group != "" {
				apiVersion = group + "/" + version
			}
			root := convert(def).(object)
			defs := object{}
			collect(root, s.Definitions, defs)
			if len(defs) > 0 {
				root["$defs"] = defs
			}
			props := root["properties"].(object)
			props["apiVersion"] = object{"type": "string", "enum": []any{apiVersion}}
			props["kind"] = object{"type": "string", "enum": []any{kind}}
			root["required"] = union(root["required"], "apiVersion", "kind")
			if err := writeSchema(dir, kind, apiVersion, root); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			n++
		}
	}
	if n < 50 {
		return fmt.Errorf("swagger.json: only %d kinds", n)
	}
	return nil
}

// writeCRD writes the schema of every version of a CustomResourceDefinition.
func writeCRD(dir string, data []byte) error {
	var crd struct {
		Spec struct {
			Group string
			Names struct{ Kind string }
			// N.B. the schema as a raw object: sigs.k8s.io/yaml gives JSON.
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema object `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return err
	}
	if crd.Spec.Names.Kind == "" || len(crd.Spec.Versions) == 0 {
		return fmt.Errorf("no kind or version: not a CustomResourceDefinition")
	}
	for _, v := range crd.Spec.Versions {
		apiVersion := crd.Spec.Group + "/" + v.Name
		root := convert(v.Schema.OpenAPIV3Schema).(object)
		props, _ := root["properties"].(object)
		if props == nil {
			return fmt.Errorf("%s %s: a schema without properties", crd.Spec.Names.Kind, apiVersion)
		}
		props["apiVersion"] = object{"type": "string", "enum": []any{apiVersion}}
		props["kind"] = object{"type": "string", "enum": []any{crd.Spec.Names.Kind}}
		root["required"] = union(root["required"], "apiVersion", "kind")
		if err := writeSchema(dir, crd.Spec.Names.Kind, apiVersion, root); err != nil {
			return err
		}
	}
	return nil
}

// writeSchema writes schema where kubeconform looks for kind of apiVersion:
// KIND-GROUP-VERSION.json, in lower case, GROUP the first label of the
// group ("" for the core group).
func writeSchema(dir, kind, apiVersion string, schema object) error {
	name := strings.ToLower(kind)
	group, version, ok := strings.Cut(apiVersion, "/")
	if ok {
		first, _, _ := strings.Cut(group, ".")
		name += "-" + strings.ToLower(first) + "-" + strings.ToLower(version)
	} else {
		name += "-" + strings.ToLower(apiVersion)
	}
	data, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644)
}

// convert returns a copy of the schema node v made strict and rid of
// OpenAPI's own forms: an object with properties takes no other
// (additionalProperties: false, unless it says otherwise); an
// int-or-string is a string or an integer; a resource.Quantity a string
// or a number; references point into $defs.
func convert(v any) any {
	switch n := v.(type) {
	case object:
		if n["format"] == "int-or-string" || n["x-kubernetes-int-or-string"] == true {
			return object{"oneOf": []any{object{"type": "string"}, object{"type": "integer"}}}
		}
		out := object{}
		for k, c := range n {
			switch k {
			case "$ref":
				ref := c.(string)
				if ref == quantityRef {
					return object{"oneOf": []any{object{"type": "string"}, object{"type": "number"}}}
				}
				out[k] = "#/$defs/" + strings.TrimPrefix(ref, "#/definitions/")
			case "properties":
				// N.B. a map of names to schemas: a property named
				// format or $ref is no keyword.
				props := object{}
				for name, p := range c.(object) {
					props[name] = convert(p)
				}
				out[k] = props
			default:
				out[k] = convert(c)
			}
		}
		if _, ok := out["properties"]; ok {
			if _, set := out["additionalProperties"]; !set && out["x-kubernetes-preserve-unknown-fields"] != true {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, c := range n {
			out[i] = convert(c)
		}
		return out
	default:
		return v
	}
}

// quantityRef is resource.Quantity's definition.
const quantityRef = "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"

// collect adds to defs every definition n refers to, converted, and those
// they refer to in turn.
func collect(n any, all map[string]object, defs object) {
	switch v := n.(type) {
	case object:
		if ref, ok := v["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/$defs/")
			if _, done := defs[name]; !done {
				def := convert(all[name])
				defs[name] = def
				collect(def, all, defs)
			}
		}
		for _, c := range v {
			collect(c, all, defs)
		}
	case []any:
		for _, c := range v {
			collect(c, all, defs)
		}
	}
}

// union is the list req (a schema's required) with names added.
func union(req any, names ...string) []any {
	set := map[string]bool{}
	var out []any
	list, _ := req.([]any)
	for _, r := range append(list, anys(names)...) {
		if s, ok := r.(string); ok && !set[s] {
			set[s] = true
			out = append(out, s)
		}
	}
	return out
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
