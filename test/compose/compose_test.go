package compose

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/walrelay/walrelay/test/kafka"
	"github.com/walrelay/walrelay/test/testbed"
)

type composeFile struct {
	Services map[string]*service `yaml:"services"`
}

type service struct {
	Image           string               `yaml:"image"`
	Build           yaml.Node            `yaml:"build"`
	Command         stringList           `yaml:"command"`
	Environment     envMap               `yaml:"environment"`
	DependsOn       map[string]dependsOn `yaml:"depends_on"`
	Healthcheck     *healthcheck         `yaml:"healthcheck"`
	Volumes         []string             `yaml:"volumes"`
	Ports           []string             `yaml:"ports"`
	StopGracePeriod string               `yaml:"stop_grace_period"`
}

type dependsOn struct {
	Condition string `yaml:"condition"`
}

type healthcheck struct {
	Test     stringList `yaml:"test"`
	Interval string     `yaml:"interval"`
	Timeout  string     `yaml:"timeout"`
	Retries  int        `yaml:"retries"`
}

// stringList is a YAML sequence of scalars, or one string split on spaces.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = strings.Fields(n.Value)
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// envMap is compose's environment: a mapping or a list of NAME=value.
type envMap map[string]string

func (e *envMap) UnmarshalYAML(n *yaml.Node) error {
	m := map[string]string{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = n.Content[i+1].Value
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			k, v, _ := strings.Cut(c.Value, "=")
			m[k] = v
		}
	default:
		return fmt.Errorf("line %d: environment is neither a mapping nor a list", n.Line)
	}
	*e = m
	return nil
}

func readCompose(t testing.TB) *composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "kafka", "walrelay"} {
		if c.Services[name] == nil {
			t.Fatalf("docker-compose.yml has no service %q", name)
		}
	}
	return &c
}

// composeHTTPAddr is the address walrelay listens on for /metrics, /healthz
// and /readyz in docker-compose.yml.
func composeHTTPAddr(t testing.TB) string {
	t.Helper()
	return setting(t, readCompose(t).Services["walrelay"].Environment, "http-addr")
}

// pgSettings returns the -c name=value settings of a postgres command line.
func pgSettings(cmd []string) map[string]string {
	out := map[string]string{}
	for i, a := range cmd {
		var kv string
		switch {
		case a == "-c" && i+1 < len(cmd):
			kv = cmd[i+1]
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			kv = a[2:]
		case strings.HasPrefix(a, "--") && strings.Contains(a, "="):
			kv = strings.ReplaceAll(a[2:], "-", "_")
		default:
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

func TestComposePostgres(t *testing.T) {
	pg := readCompose(t).Services["postgres"]
	// N.B. a major version make matrix runs (testbed.PGVersions): the
	// compose stack must be one the tests proved.
	tag, ok := strings.CutPrefix(pg.Image, "postgres:")
	major, _, _ := strings.Cut(tag, ".")
	major, _, _ = strings.Cut(major, "-")
	if !ok || !slices.Contains(testbed.PGVersions, major) {
		t.Errorf("postgres image %q, want postgres:MAJOR with MAJOR one of the tested %v", pg.Image, testbed.PGVersions)
	}
	set := pgSettings(pg.Command)
	if set["wal_level"] != "logical" {
		t.Errorf("postgres command %q does not set wal_level=logical", pg.Command)
	}
	for _, k := range []string{"max_replication_slots", "max_wal_senders"} {
		if v, ok := set[k]; ok && (v == "0" || v == "") {
			t.Errorf("postgres command sets %s=%s: walrelay needs a slot and a walsender", k, v)
		}
	}
	for _, k := range []string{"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"} {
		if pg.Environment[k] == "" {
			t.Errorf("postgres environment lacks %s", k)
		}
	}
	mounted := false
	for _, v := range pg.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || path.Dir(parts[1]) != "/docker-entrypoint-initdb.d" {
			continue
		}
		if path.Clean(parts[0]) != "deploy/compose/init.sql" {
			t.Errorf("postgres mounts %s as its init script, want ./deploy/compose/init.sql", parts[0])
		}
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(parts[0]))); err != nil {
			t.Errorf("postgres init script: %v", err)
		}
		mounted = true
	}
	if !mounted {
		t.Error("postgres mounts no script into /docker-entrypoint-initdb.d: the outbox table would not exist")
	}
	if pg.Healthcheck == nil || !strings.Contains(strings.Join(pg.Healthcheck.Test, " "), "pg_isready") {
		t.Error("postgres has no pg_isready health check")
	}
}

func TestComposeKafka(t *testing.T) {
	k := readCompose(t).Services["kafka"]
	tag, ok := strings.CutPrefix(k.Image, "apache/kafka:")
	if !ok || !strings.HasPrefix(tag, "4.") {
		t.Errorf("kafka image %q, want apache/kafka:4.x", k.Image)
	} else if tag != kafka.Version {
		t.Errorf("kafka image %q, want apache/kafka:%s, the version the test bed runs (test/kafka)", k.Image, kafka.Version)
	}
	env := k.Environment
	roles := strings.Split(env["KAFKA_PROCESS_ROLES"], ",")
	if len(roles) != 2 || !contains(roles, "broker") || !contains(roles, "controller") {
		t.Errorf("KAFKA_PROCESS_ROLES=%q, want broker,controller (one KRaft node)", env["KAFKA_PROCESS_ROLES"])
	}
	for _, k := range []string{"KAFKA_NODE_ID", "KAFKA_CONTROLLER_QUORUM_VOTERS", "KAFKA_CONTROLLER_LISTENER_NAMES", "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS"} {
		if env[k] == "" {
			t.Errorf("kafka environment lacks %s", k)
		}
	}
	if env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] != "false" {
		t.Errorf("KAFKA_AUTO_CREATE_TOPICS_ENABLE=%q, want false: walrelay creates its topics", env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"])
	}
	if k.Healthcheck == nil || len(k.Healthcheck.Test) < 2 || !strings.HasPrefix(k.Healthcheck.Test[1], "/opt/kafka/bin/") {
		t.Error("kafka has no health check running a tool of the image (/opt/kafka/bin/...)")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

// listenerAddrs returns the host:port of each listener in a Kafka listeners
// value (NAME://host:port,...).
func listenerAddrs(v string) []string {
	var out []string
	for _, l := range strings.Split(v, ",") {
		if _, addr, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
			out = append(out, addr)
		}
	}
	return out
}

func TestComposeWalrelay(t *testing.T) {
	c := readCompose(t)
	w := c.Services["walrelay"]
	env := w.Environment

	t.Run("built from the Dockerfile", func(t *testing.T) {
		var ctx string
		switch w.Build.Kind {
		case yaml.ScalarNode:
			ctx = w.Build.Value
		case yaml.MappingNode:
			var b struct{ Context, Dockerfile string }
			if err := w.Build.Decode(&b); err != nil {
				t.Fatal(err)
			}
			ctx = b.Context
			if b.Dockerfile != "" && b.Dockerfile != "Dockerfile" {
				t.Errorf("walrelay builds from %s, want Dockerfile", b.Dockerfile)
			}
		default:
			t.Fatal("walrelay has no build: it must be built from ./Dockerfile")
		}
		if path.Clean(ctx) != "." {
			t.Errorf("walrelay build context %q, want . (the repository)", ctx)
		}
	})

	t.Run("waits for healthy dependencies", func(t *testing.T) {
		for _, dep := range []string{"postgres", "kafka"} {
			d, ok := w.DependsOn[dep]
			if !ok || d.Condition != "service_healthy" {
				t.Errorf("walrelay depends_on %s: %+v, want condition: service_healthy", dep, d)
			}
			if c.Services[dep].Healthcheck == nil {
				t.Errorf("%s has no health check, so service_healthy never holds", dep)
			}
		}
	})

	t.Run("environment names real flags", func(t *testing.T) {
		checkEnvFlags(t, "docker-compose.yml walrelay", env)
	})

	t.Run("reaches postgres", func(t *testing.T) {
		pgEnv := c.Services["postgres"].Environment
		u, err := url.Parse(env["WALRELAY_PG_URL"])
		if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" {
			t.Fatalf("WALRELAY_PG_URL=%q: want a postgres:// URL (%v)", env["WALRELAY_PG_URL"], err)
		}
		pw, _ := u.User.Password()
		if u.Hostname() != "postgres" || u.Port() != "5432" {
			t.Errorf("WALRELAY_PG_URL host %s, want postgres:5432 (the service)", u.Host)
		}
		if u.User.Username() != pgEnv["POSTGRES_USER"] || pw != pgEnv["POSTGRES_PASSWORD"] || strings.TrimPrefix(u.Path, "/") != pgEnv["POSTGRES_DB"] {
			t.Errorf("WALRELAY_PG_URL user/password/database %s/%s/%s, want postgres' POSTGRES_USER/PASSWORD/DB %s/%s/%s",
				u.User.Username(), pw, u.Path, pgEnv["POSTGRES_USER"], pgEnv["POSTGRES_PASSWORD"], pgEnv["POSTGRES_DB"])
		}
	})

	t.Run("reaches kafka", func(t *testing.T) {
		adv := listenerAddrs(c.Services["kafka"].Environment["KAFKA_ADVERTISED_LISTENERS"])
		for _, b := range strings.Split(setting(t, env, "brokers"), ",") {
			if !contains(adv, b) {
				t.Errorf("WALRELAY_BROKERS names %s, which kafka does not advertise (%v)", b, adv)
			}
		}
	})

	t.Run("uses the publication init.sql creates", func(t *testing.T) {
		pub := initSQLPublication(t)
		if got := setting(t, env, "publication"); got != pub {
			t.Errorf("walrelay streams publication %q, init.sql creates %q", got, pub)
		}
	})

	t.Run("health check probes /readyz", func(t *testing.T) {
		hc := w.Healthcheck
		if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
			t.Fatalf("walrelay health check %v, want [CMD, /usr/local/bin/walrelay, health, --url, http://...]: the image has no shell", hc)
		}
		checkHealthCommand(t, hc.Test[1:], "/readyz")
	})

	t.Run("publishes its http port", func(t *testing.T) {
		_, port, err := net.SplitHostPort(setting(t, env, "http-addr"))
		if err != nil {
			t.Fatalf("--http-addr: %v", err)
		}
		found := false
		for _, p := range w.Ports {
			found = found || strings.HasSuffix(p, ":"+port)
		}
		if !found {
			t.Errorf("walrelay ports %v do not publish %s (/metrics)", w.Ports, port)
		}
	})

	t.Run("stops gracefully", func(t *testing.T) {
		grace, err := time.ParseDuration(w.StopGracePeriod)
		if err != nil {
			t.Fatalf("walrelay stop_grace_period %q: %v (docker's default, 10s, is shorter than --shutdown-timeout)", w.StopGracePeriod, err)
		}
		shutdown, err := time.ParseDuration(setting(t, env, "shutdown-timeout"))
		if err != nil {
			t.Fatal(err)
		}
		if grace <= shutdown {
			t.Errorf("stop_grace_period %s is not longer than --shutdown-timeout %s: docker would kill walrelay mid-shutdown", grace, shutdown)
		}
	})
}

// checkHealthCommand checks that cmd (binary and arguments) is a walrelay
// sub-command whose flags exist and whose --url hits path on the port
// walrelay listens on in docker-compose.yml.
func checkHealthCommand(t *testing.T, cmd []string, wantPath string) {
	t.Helper()
	df, err := readDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := df.last("ENTRYPOINT")
	entry, err := execForm(ep)
	if err != nil || len(entry) == 0 {
		t.Fatalf("Dockerfile ENTRYPOINT: %v", err)
	}
	if cmd[0] != entry[0] {
		t.Errorf("health check runs %s, the image's binary is %s", cmd[0], entry[0])
	}
	if len(cmd) < 2 || strings.HasPrefix(cmd[1], "-") {
		t.Fatalf("health check %v names no sub-command", cmd)
	}
	flags := helpFlags(t, cmd[1])
	var rawURL string
	for i := 2; i < len(cmd); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(cmd[i], "-"), "=")
		if !strings.HasPrefix(cmd[i], "-") {
			t.Errorf("health check argument %q is not a flag", cmd[i])
			continue
		}
		if _, ok := flags[name]; !ok {
			t.Errorf("health check passes --%s, which `walrelay %s` does not have", name, cmd[1])
		}
		if !hasVal && i+1 < len(cmd) && !strings.HasPrefix(cmd[i+1], "-") {
			i++
			val = cmd[i]
		}
		if name == "url" {
			rawURL = val
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("health check --url %q: want http://127.0.0.1:PORT%s (%v)", rawURL, wantPath, err)
	}
	_, port, err := net.SplitHostPort(composeHTTPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" {
		t.Errorf("health check --url host %s, want 127.0.0.1 (the container itself)", h)
	}
	if u.Port() != port || u.Path != wantPath {
		t.Errorf("health check --url %s, want port %s (--http-addr) and path %s", rawURL, port, wantPath)
	}
}

var publicationRE = regexp.MustCompile(`(?i)CREATE\s+PUBLICATION\s+"?([a-z_][a-z0-9_]*)"?`)

// initSQLPublication returns the publication init.sql creates.
func initSQLPublication(t testing.TB) string {
	t.Helper()
	m := publicationRE.FindStringSubmatch(readInitSQL(t))
	if m == nil {
		t.Fatal("deploy/compose/init.sql creates no publication")
	}
	return strings.ToLower(m[1])
}

func readInitSQL(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose", "init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
