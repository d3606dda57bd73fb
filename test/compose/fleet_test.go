package compose

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// fleetCompose is what TestComposeFleet reads of docker-compose.yml: the
// fleet's services and the compose secrets.
type fleetCompose struct {
	Services map[string]struct {
		Profiles        []string             `yaml:"profiles"`
		Image           string               `yaml:"image"`
		Command         stringList           `yaml:"command"`
		Environment     envMap               `yaml:"environment"`
		DependsOn       map[string]dependsOn `yaml:"depends_on"`
		Healthcheck     *healthcheck         `yaml:"healthcheck"`
		Volumes         []string             `yaml:"volumes"`
		Secrets         []string             `yaml:"secrets"`
		Ports           []string             `yaml:"ports"`
		StopGracePeriod string               `yaml:"stop_grace_period"`
	} `yaml:"services"`
	Secrets map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

// fleetReplicaPrefix names the fleet's replicas in docker-compose.yml.
const fleetReplicaPrefix = "walrelay-fleet-"

// TestComposeFleet checks docker-compose.yml's two-replica fleet (profile
// fleet) without Docker: two walrelay services run one pipeline file with
// a group: and different instance names; every file the pipeline file
// names is a mounted compose secret; the file loads (walrelay status
// --config: every mistake is exit 2); fleet-init.sql creates each
// pipeline's database and publication.
func TestComposeFleet(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c fleetCompose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	var replicas []string
	for name := range c.Services {
		if strings.HasPrefix(name, fleetReplicaPrefix) {
			replicas = append(replicas, name)
		}
	}
	slices.Sort(replicas)
	if len(replicas) != 2 {
		t.Fatalf("docker-compose.yml has fleet replicas %v, want two (%s1, %s2)", replicas, fleetReplicaPrefix, fleetReplicaPrefix)
	}
	first := c.Services[replicas[0]]
	// The pipeline file: the volume mounted at the path --config names.
	config := ""
	for i, a := range first.Command {
		if a == "--config" && i+1 < len(first.Command) {
			config = first.Command[i+1]
		}
	}
	if len(first.Command) == 0 || first.Command[0] != "run" || config == "" {
		t.Fatalf("%s command %v, want run --config FILE", replicas[0], first.Command)
	}
	hostFile := ""
	for _, v := range first.Volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == config {
			hostFile = path.Clean(parts[0])
		}
	}
	if hostFile == "" {
		t.Fatalf("%s mounts nothing at %s (its --config)", replicas[0], config)
	}
	instances := map[string]string{}
	for _, name := range replicas {
		s := c.Services[name]
		if !slices.Contains(s.Profiles, "fleet") {
			t.Errorf("%s profiles %v, want fleet (docker compose --profile fleet up)", name, s.Profiles)
		}
		if !slices.Equal(s.Command, first.Command) || !slices.Equal(s.Volumes, first.Volumes) || !slices.Equal(s.Secrets, first.Secrets) {
			t.Errorf("%s runs %v with %v and secrets %v; %s %v with %v and %v: the replicas of a group run one file", name, s.Command, s.Volumes, s.Secrets, replicas[0], first.Command, first.Volumes, first.Secrets)
		}
		checkEnvFlags(t, "docker-compose.yml "+name, s.Environment)
		inst := s.Environment["WALRELAY_FLEET_INSTANCE"]
		if inst == "" {
			t.Errorf("%s sets no WALRELAY_FLEET_INSTANCE: the replicas would be told apart only by container id", name)
		} else if other, ok := instances[inst]; ok {
			t.Errorf("%s and %s are both instance %q", name, other, inst)
		}
		instances[inst] = name
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
			t.Errorf("%s health check %v, want [CMD, /usr/local/bin/walrelay, health, --url, .../readyz]", name, s.Healthcheck)
		} else {
			checkHealthCommand(t, s.Healthcheck.Test[1:], "/readyz")
		}
		if d, ok := s.DependsOn["kafka"]; !ok || d.Condition != "service_healthy" {
			t.Errorf("%s depends_on kafka %+v, want condition: service_healthy", name, d)
		}
		if d, ok := s.DependsOn["fleet-init"]; !ok || d.Condition != "service_completed_successfully" {
			t.Errorf("%s depends_on fleet-init %+v, want condition: service_completed_successfully (the databases exist)", name, d)
		}
	}

	fleetFile, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(hostFile)))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^group: *\S+`).Match(fleetFile) {
		t.Errorf("%s has no group:: two replicas without one would both try every slot", hostFile)
	}
	grace, err := time.ParseDuration(first.StopGracePeriod)
	if m := regexp.MustCompile(`(?m)^\s*shutdown-timeout: *(\S+)`).FindSubmatch(fleetFile); err != nil || m == nil {
		t.Errorf("stop_grace_period %q (%v) and %s's shutdown-timeout: want both, the grace longer", first.StopGracePeriod, err, hostFile)
	} else if d, err := time.ParseDuration(string(m[1])); err != nil || d >= grace {
		t.Errorf("shutdown-timeout %s (%v) of %s is not shorter than stop_grace_period %s: a stop would be killed before the handover", m[1], err, hostFile, grace)
	}

	// Every file the pipeline file names is a compose secret of the
	// replicas, under /run/secrets; the test puts each secret's file at
	// that path's place.
	dir := t.TempDir()
	files := map[string]string{}
	var dbs []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:-\s+)?([a-z-]+-file): *(\S+)`).FindAllSubmatch(fleetFile, -1) {
		key, p := string(m[1]), string(m[2])
		name, ok := strings.CutPrefix(p, "/run/secrets/")
		if !ok || !slices.Contains(first.Secrets, name) || c.Secrets[name].File == "" {
			t.Errorf("%s: %s: %s is no compose secret of the replicas (%v) under /run/secrets", hostFile, key, p, first.Secrets)
			continue
		}
		secret, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(c.Secrets[name].File)))
		if err != nil {
			t.Fatalf("secret %s: %v", name, err)
		}
		if key == "pg-url-file" {
			u, err := url.Parse(strings.TrimSpace(string(secret)))
			if err != nil || u.Hostname() != "postgres" {
				t.Errorf("secret %s: %q (%v), want a URL of host postgres", name, secret, err)
			} else {
				dbs = append(dbs, strings.TrimPrefix(u.Path, "/"))
			}
		}
		files[p] = filepath.Join(dir, name)
		if err := os.WriteFile(files[p], secret, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if len(dbs) < 2 {
		t.Errorf("%s: %d pipelines with a pg-url-file, want two at least (a fleet)", hostFile, len(dbs))
	}
	checkFleetFileLoads(t, fleetFile, files)

	// fleet-init.sql creates each pipeline's database, with the outbox
	// and the publication of the file's defaults.
	sql, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose", "fleet-init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	pub := regexp.MustCompile(`(?m)^\s*publication: *(\S+)`).FindSubmatch(fleetFile)
	for _, db := range dbs {
		if !regexp.MustCompile(`(?s)CREATE DATABASE ` + db + `\b.*\\connect ` + db + `\n[^\\]*CREATE TABLE IF NOT EXISTS outbox[^\\]*CREATE PUBLICATION ` + string(pub[1]) + ` FOR TABLE outbox`).Match(sql) {
			t.Errorf("fleet-init.sql does not create database %s with table outbox and publication %s", db, pub[1])
		}
	}
}

// TestKubernetesFleetFileLoads: the pipeline file of the Kubernetes fleet
// example (the chart's fleet rendering, deploy/kubernetes/walrelay-fleet.yaml)
// loads, with its mounted files (PostgreSQL URLs, the SASL password, the
// brokers' CA) in place.
func TestKubernetesFleetFileLoads(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", "walrelay-fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var fleetFile []byte
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var obj struct {
			Kind string
			Data map[string]string
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ConfigMap" && obj.Data["fleet.yaml"] != "" {
			fleetFile = []byte(obj.Data["fleet.yaml"])
		}
	}
	if fleetFile == nil {
		t.Fatal("deploy/kubernetes/walrelay-fleet.yaml: no ConfigMap with fleet.yaml")
	}
	dir := t.TempDir()
	files := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:-\s+)?([a-z-]+-file): *"?([^"\s]+)`).FindAllSubmatch(fleetFile, -1) {
		key, p := string(m[1]), string(m[2])
		local := filepath.Join(dir, strings.ReplaceAll(strings.Trim(p, "/"), "/", "_"))
		content := []byte("postgres://walrelay:secret@db.example.internal:5432/" + path.Base(p) + "?sslmode=verify-full\n")
		switch key {
		case "kafka-tls-ca-file":
			content, _ = testCA(t)
		case "kafka-sasl-password-file":
			content = []byte("secret\n")
		}
		if err := os.WriteFile(local, content, 0o600); err != nil {
			t.Fatal(err)
		}
		files[p] = local
	}
	checkFleetFileLoads(t, fleetFile, files)
}

// checkFleetFileLoads writes fleetFile, its paths replaced by files', and
// has walrelay status --config load it: a file with any mistake is exit 2
// with every mistake; one that loads goes on to ask the fleet, which does
// not run here (exit 1).
func checkFleetFileLoads(t *testing.T, fleetFile []byte, files map[string]string) {
	t.Helper()
	s := string(fleetFile)
	for p, local := range files {
		s = strings.ReplaceAll(s, p, local)
	}
	f := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "status", "--config", f, "--http-addr", freeAddr(t))
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "ask the fleet") {
		t.Fatalf("walrelay status --config (the file with its secrets' paths replaced): %v, want exit 1 asking the fleet (the file loaded):\n%s", err, out)
	}
}
