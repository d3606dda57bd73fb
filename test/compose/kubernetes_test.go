package compose

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type k8sMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
}

type deployment struct {
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool  `yaml:"runAsNonRoot"`
		RunAsUser    *int64 `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"` // a number or a port name
	} `yaml:"httpGet"`
}

type k8sService struct {
	Spec struct {
		Selector                 map[string]string `yaml:"selector"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Ports                    []struct {
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// readManifest decodes every document of deploy/kubernetes/walrelay.yaml.
func readManifest(t testing.TB) map[string][]*yaml.Node {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", "walrelay.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]*yaml.Node{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("deploy/kubernetes/walrelay.yaml: %v", err)
		}
		var m k8sMeta
		if err := doc.Decode(&m); err != nil {
			t.Fatalf("deploy/kubernetes/walrelay.yaml line %d: %v", doc.Line, err)
		}
		if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
			t.Fatalf("deploy/kubernetes/walrelay.yaml line %d: a document without apiVersion, kind or metadata.name", doc.Line)
		}
		byKind[m.Kind] = append(byKind[m.Kind], &doc)
	}
	return byKind
}

// portNumber resolves a probe's or a Service's port (number or name).
func (c *container) portNumber(t *testing.T, n yaml.Node) int {
	t.Helper()
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	t.Fatalf("port %q is not a port of container %s", n.Value, c.Name)
	return 0
}

func TestKubernetesManifest(t *testing.T) {
	docs := readManifest(t)
	if len(docs["Deployment"]) != 1 {
		t.Fatalf("want one Deployment, found %d", len(docs["Deployment"]))
	}
	var d deployment
	if err := docs["Deployment"][0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2: one streams the slot, one waits to take over", d.Spec.Replicas)
	}
	// N.B. a standby is never ready while another pod holds the slot, so a
	// RollingUpdate (which waits for new pods to become ready) never ends.
	if d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("strategy %q, want Recreate: a rolling update would wait forever for a standby to become ready", d.Spec.Strategy.Type)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod labels %v", k, v, d.Spec.Template.Metadata.Labels)
		}
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, found %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.Name == "WALRELAY_PG_URL" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Error("WALRELAY_PG_URL is not taken from a Secret (valueFrom.secretKeyRef): it holds a password")
		}
		if strings.Contains(e.Name, "PASSWORD") && e.Value != "" {
			t.Errorf("%s has a literal value: take it from a Secret", e.Name)
		}
	}
	if _, ok := env["WALRELAY_PG_URL"]; !ok {
		t.Error("the container does not set WALRELAY_PG_URL")
	}

	t.Run("environment names real flags", func(t *testing.T) {
		checkEnvFlags(t, "deploy/kubernetes/walrelay.yaml", env)
	})

	t.Run("probes", func(t *testing.T) {
		_, portStr, err := net.SplitHostPort(setting(t, env, "http-addr"))
		if err != nil {
			t.Fatalf("--http-addr: %v", err)
		}
		port, _ := strconv.Atoi(portStr)
		for _, p := range []struct {
			name  string
			probe *probe
			path  string
		}{
			{"livenessProbe", c.LivenessProbe, "/healthz"},
			{"readinessProbe", c.ReadinessProbe, "/readyz"},
		} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s is missing or not an httpGet (the image has no shell)", p.name)
				continue
			}
			if p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s path %s, want %s", p.name, p.probe.HTTPGet.Path, p.path)
			}
			if got := c.portNumber(t, p.probe.HTTPGet.Port); got != port {
				t.Errorf("%s port %d, walrelay listens on %d (--http-addr)", p.name, got, port)
			}
		}
	})

	t.Run("security", func(t *testing.T) {
		sc := pod.SecurityContext
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Error("pod securityContext.runAsNonRoot is not true")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Error("pod securityContext.runAsUser is 0")
		}
		csc := c.SecurityContext
		if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			t.Error("container securityContext.readOnlyRootFilesystem is not true")
		}
		if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			t.Error("container securityContext.allowPrivilegeEscalation is not false")
		}
		if !contains(csc.Capabilities.Drop, "ALL") {
			t.Error("container does not drop ALL capabilities")
		}
	})

	t.Run("resources", func(t *testing.T) {
		if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
			t.Errorf("resources %+v, want cpu and memory requests and a memory limit", c.Resources)
		}
	})

	t.Run("stops gracefully", func(t *testing.T) {
		shutdown, err := time.ParseDuration(setting(t, env, "shutdown-timeout"))
		if err != nil {
			t.Fatal(err)
		}
		grace := 30 * time.Second // Kubernetes' default
		if pod.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
		}
		if grace <= shutdown {
			t.Errorf("terminationGracePeriodSeconds %s is not longer than --shutdown-timeout %s", grace, shutdown)
		}
	})

	t.Run("metrics service", func(t *testing.T) {
		for _, doc := range docs["Service"] {
			var s k8sService
			if err := doc.Decode(&s); err != nil {
				t.Fatal(err)
			}
			for k, v := range s.Spec.Selector {
				if d.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("Service selector %s=%s does not select the pods (%v)", k, v, d.Spec.Template.Metadata.Labels)
				}
			}
			if !s.Spec.PublishNotReadyAddresses {
				t.Error("Service does not publish not-ready addresses: the standby's metrics would not be scraped")
			}
			_, portStr, _ := net.SplitHostPort(setting(t, env, "http-addr"))
			port, _ := strconv.Atoi(portStr)
			for _, p := range s.Spec.Ports {
				if got := c.portNumber(t, p.TargetPort); got != port {
					t.Errorf("Service targets port %d, walrelay listens on %d", got, port)
				}
			}
		}
	})
}
