package compose

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
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
		RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
		RunAsUser      *int64 `yaml:"runAsUser"`
		RunAsGroup     *int64 `yaml:"runAsGroup"`
		FSGroup        *int64 `yaml:"fsGroup"`
		SeccompProfile struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName  string `yaml:"secretName"`
			DefaultMode *int   `yaml:"defaultMode"`
		} `yaml:"secret"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
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
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
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

type networkPolicy struct {
	Spec struct {
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []npRule `yaml:"ingress"`
		Egress      []npRule `yaml:"egress"`
	} `yaml:"spec"`
}

type npRule struct {
	From  []yaml.Node `yaml:"from"`
	To    []yaml.Node `yaml:"to"`
	Ports []struct {
		Protocol string    `yaml:"protocol"`
		Port     yaml.Node `yaml:"port"`
	} `yaml:"ports"`
}

var pgURLPortRE = regexp.MustCompile(`postgres(?:ql)?://[^\s/]*@[^\s/:]+:(\d+)/`)

// manifestComments is the manifest's comment text, "#" and continuation
// backslashes removed: the commands it tells the user to run.
func manifestComments(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", "walrelay.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "#") {
			l = strings.TrimSpace(strings.TrimPrefix(l, "#"))
			if strings.HasSuffix(l, "\\") {
				b.WriteString(strings.TrimSuffix(l, "\\"))
				continue
			}
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// createsKey reports whether a `kubectl create <what> ...` line of text
// creates key (--from-file=key=... or --from-literal=key=...).
func createsKey(text, what, key string) bool {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "kubectl create "+what+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "--from-file="+key+"=") || strings.HasPrefix(f, "--from-literal="+key+"=") {
				return true
			}
		}
	}
	return false
}

// manifestEnv is the Deployment's container environment (literal values).
func manifestEnv(t testing.TB) map[string]string {
	t.Helper()
	docs := readManifest(t)
	if len(docs["Deployment"]) != 1 {
		t.Fatalf("want one Deployment, found %d", len(docs["Deployment"]))
	}
	var d deployment
	if err := docs["Deployment"][0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	return env
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
		// N.B. a secret in the environment shows in kubectl describe (a
		// literal) and in every crash dump of the process: files only.
		if (e.Name == "WALRELAY_PG_URL" || strings.Contains(e.Name, "PASSWORD")) && !strings.HasSuffix(e.Name, "_FILE") {
			t.Errorf("%s is set in the environment: mount it as a file of a Secret volume (%s_FILE)", e.Name, e.Name)
		}
	}
	if _, ok := env["WALRELAY_PG_URL_FILE"]; !ok {
		t.Error("the container does not set WALRELAY_PG_URL_FILE (the connection string as a file of a Secret)")
	}

	t.Run("files come from mounted volumes", func(t *testing.T) {
		text := manifestComments(t)
		files := 0
		for name, file := range env {
			if !strings.HasPrefix(name, envPrefix) || !strings.HasSuffix(name, "_FILE") {
				continue
			}
			files++
			var mount string
			readOnly := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == path.Dir(file) {
					mount, readOnly = m.Name, m.ReadOnly
				}
			}
			if mount == "" {
				t.Errorf("%s=%s: no volume is mounted at %s", name, file, path.Dir(file))
				continue
			}
			if !readOnly {
				t.Errorf("volume %s (%s) is not mounted readOnly", mount, path.Dir(file))
			}
			key := path.Base(file)
			for _, v := range pod.Volumes {
				if v.Name != mount {
					continue
				}
				switch {
				case v.Secret != nil:
					if !strings.Contains(text, "kubectl create secret generic "+v.Secret.SecretName+" ") || !createsKey(text, "secret generic "+v.Secret.SecretName, key) {
						t.Errorf("%s reads key %s of Secret %s, which the comment's kubectl create secret generic %s does not create", name, key, v.Secret.SecretName, v.Secret.SecretName)
					}
					// N.B. readable by the pod's fsGroup only: walrelay's
					// group, not every user of the node's kubelet.
					if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
						t.Errorf("Secret volume %s: defaultMode %v, want no access for others (0440, group fsGroup)", mount, v.Secret.DefaultMode)
					}
				case v.ConfigMap != nil:
					if name == "WALRELAY_PG_URL_FILE" || strings.Contains(name, "PASSWORD") {
						t.Errorf("%s comes from ConfigMap %s: a secret belongs in a Secret", name, v.ConfigMap.Name)
					}
					if !createsKey(text, "configmap "+v.ConfigMap.Name, key) {
						t.Errorf("%s reads key %s of ConfigMap %s, which the comment's kubectl create configmap does not create", name, key, v.ConfigMap.Name)
					}
				default:
					t.Errorf("volume %s is neither a Secret nor a ConfigMap", mount)
				}
			}
		}
		if files == 0 {
			t.Error("no WALRELAY_*_FILE variable")
		}
	})

	t.Run("no creation, Kafka over TLS with SCRAM", func(t *testing.T) {
		if env["WALRELAY_CREATE"] != "false" {
			t.Errorf("WALRELAY_CREATE=%q, want false: the pods need no CREATE privilege once walrelay setup made the slot and publication", env["WALRELAY_CREATE"])
		}
		tls := env["WALRELAY_KAFKA_TLS"] == "true"
		for name := range env {
			if strings.HasPrefix(name, "WALRELAY_KAFKA_TLS_") && strings.HasSuffix(name, "_FILE") {
				tls = true
			}
		}
		if !tls {
			t.Error("Kafka TLS is not on (WALRELAY_KAFKA_TLS or a WALRELAY_KAFKA_TLS_*_FILE)")
		}
		if m := setting(t, env, "kafka-sasl-mechanism"); !strings.HasPrefix(m, "SCRAM-SHA-") {
			t.Errorf("--kafka-sasl-mechanism %q, want SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
		if env["WALRELAY_KAFKA_SASL_USERNAME"] == "" || env["WALRELAY_KAFKA_SASL_PASSWORD_FILE"] == "" {
			t.Error("SASL needs WALRELAY_KAFKA_SASL_USERNAME and WALRELAY_KAFKA_SASL_PASSWORD_FILE")
		}
	})

	t.Run("environment names real flags", func(t *testing.T) {
		checkEnvFlags(t, "deploy/kubernetes/walrelay.yaml", env)
	})

	t.Run("arguments are walrelay run's", func(t *testing.T) {
		// N.B. args replace the image's CMD (["run"]) and keep its
		// ENTRYPOINT: the first is the sub-command, the rest its flags.
		if len(c.Args) == 0 || c.Args[0] != "run" {
			t.Fatalf("container args %q, want [run ...]", c.Args)
		}
		flags := runFlags(t)
		for _, a := range c.Args[1:] {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if strings.HasPrefix(a, "-") {
				if _, ok := flags[name]; !ok {
					t.Errorf("container arg %s: `walrelay run` has no flag --%s", a, name)
				}
			}
		}
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
		if sc.SeccompProfile.Type != "RuntimeDefault" {
			t.Errorf("pod seccompProfile %q, want RuntimeDefault", sc.SeccompProfile.Type)
		}
		// The image's user (the Dockerfile's USER), so the Secret's group
		// is walrelay's.
		df, err := readDockerfile()
		if err != nil {
			t.Fatal(err)
		}
		user, _ := df.last("USER")
		u, g, _ := strings.Cut(user, ":")
		str := func(p *int64) string {
			if p == nil {
				return "unset"
			}
			return strconv.FormatInt(*p, 10)
		}
		if str(sc.RunAsUser) != u || str(sc.RunAsGroup) != g || str(sc.FSGroup) != g {
			t.Errorf("pod runs as %s:%s with fsGroup %s, want the image's USER %s and fsGroup %s", str(sc.RunAsUser), str(sc.RunAsGroup), str(sc.FSGroup), user, g)
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

	t.Run("network policy", func(t *testing.T) {
		if len(docs["NetworkPolicy"]) != 1 {
			t.Fatalf("want one NetworkPolicy, found %d", len(docs["NetworkPolicy"]))
		}
		var np networkPolicy
		if err := docs["NetworkPolicy"][0].Decode(&np); err != nil {
			t.Fatal(err)
		}
		if len(np.Spec.PodSelector.MatchLabels) == 0 {
			t.Error("NetworkPolicy selects every pod of the namespace")
		}
		for k, v := range np.Spec.PodSelector.MatchLabels {
			if d.Spec.Template.Metadata.Labels[k] != v {
				t.Errorf("NetworkPolicy selector %s=%s does not select the pods (%v)", k, v, d.Spec.Template.Metadata.Labels)
			}
		}
		if !contains(np.Spec.PolicyTypes, "Ingress") || !contains(np.Spec.PolicyTypes, "Egress") {
			t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
		}
		_, httpPort, _ := net.SplitHostPort(setting(t, env, "http-addr"))
		if len(np.Spec.Ingress) == 0 {
			t.Error("no ingress rule: the metrics cannot be scraped")
		}
		for i, r := range np.Spec.Ingress {
			if len(r.From) == 0 || len(r.Ports) == 0 {
				t.Errorf("ingress rule %d allows every source or every port", i)
			}
			for _, p := range r.Ports {
				if strconv.Itoa(c.portNumber(t, p.Port)) != httpPort {
					t.Errorf("ingress rule %d opens port %s, walrelay serves only %s (--http-addr)", i, p.Port.Value, httpPort)
				}
			}
		}
		allowed := map[string]bool{}
		for i, r := range np.Spec.Egress {
			if len(r.To) == 0 || len(r.Ports) == 0 {
				t.Errorf("egress rule %d allows every destination or every port", i)
			}
			for _, p := range r.Ports {
				proto := p.Protocol
				if proto == "" {
					proto = "TCP"
				}
				allowed[proto+"/"+p.Port.Value] = true
			}
		}
		want := map[string]string{"UDP/53": "DNS"}
		for _, b := range strings.Split(setting(t, env, "brokers"), ",") {
			_, port, err := net.SplitHostPort(strings.TrimSpace(b))
			if err != nil {
				t.Fatalf("WALRELAY_BROKERS %q: %v", b, err)
			}
			want["TCP/"+port] = "broker " + b
		}
		pgPort := "5432"
		if m := pgURLPortRE.FindStringSubmatch(manifestComments(t)); m != nil {
			pgPort = m[1]
		}
		want["TCP/"+pgPort] = "PostgreSQL (the comment's pg-url)"
		for k, what := range want {
			if !allowed[k] {
				t.Errorf("egress does not allow %s (%s)", k, what)
			}
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
