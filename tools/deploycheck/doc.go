// Package deploycheck checks walrelay's Kubernetes deployment: the Helm
// chart of deploy/helm/walrelay, rendered by Helm's own engine (helm.sh/helm/v4)
// for every values file of its ci/ directory, and the plain manifests of
// deploy/kubernetes, validated by kubeconform (github.com/yannh/kubeconform)
// in strict mode against the Kubernetes JSON schemas.
//
// Input: the chart and the manifests; the Kubernetes OpenAPI spec
// (api/openapi-spec/swagger.json of module k8s.io/kubernetes, at the
// release of the k8s.io modules Helm is built with) and prometheus-operator's
// ServiceMonitor CustomResourceDefinition, both fetched through the Go
// module proxy (go mod download) and checked against the sums pinned here.
// Output: the schemas in kubeconform's layout (KUBERNETES_VERSION-standalone-strict/
// KIND-GROUP-VERSION.json), made by Schemas, and each manifest's verdict.
//
// Invariant: every object the chart renders and every object of
// deploy/kubernetes has a schema and passes it: a field no schema names (a
// misspelling), a value of the wrong type or a missing required field fails
// the check (TestValidatorRejects proves the validator does reject them).
//
// It is a module of its own (like tools/image and tools/otelcol), so that
// Helm's and Kubernetes' modules are none of walrelay's dependencies; make
// deploy-check runs its tests.
package deploycheck
