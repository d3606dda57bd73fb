package compose

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/walrelay/walrelay/test/testbed"
)

// fleetPipeline is what TestComposeFleetStreams reads of a replica's
// /pipelines.
type fleetPipeline struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Owner string `json:"owner"`
	Ready bool   `json:"ready"`
}

// TestComposeFleetStreams runs docker-compose.yml's fleet the way compose
// would, against the test bed instead of the compose services: fleet-init.sql
// through psql, then two walrelays on deploy/compose/fleet.yaml with the
// replicas' WALRELAY_FLEET_INSTANCE (the bed's brokers, databases, and slot
// and group names of this test's own in place of the compose ones). Each
// pipeline streams on exactly one replica; an event written to each
// database is read back from Kafka; SIGTERM of one replica (exit 0) hands
// its pipelines to the other, which relays the next events.
func TestComposeFleetStreams(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	suffix := make([]byte, 4)
	rand.Read(suffix)
	uniq := hex.EncodeToString(suffix)

	fleetFile, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	initSQL, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose", "fleet-init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	// The pipelines' databases, by the secret each pg-url-file names.
	secretOf := regexp.MustCompile(`(?m)^\s*pg-url-file: */run/secrets/(\S+)`).FindAllSubmatch(fleetFile, -1)
	if len(secretOf) != 2 {
		t.Fatalf("deploy/compose/fleet.yaml: %d pipelines with a /run/secrets pg-url-file, want 2", len(secretOf))
	}
	file, sql := string(fleetFile), string(initSQL)
	dir := t.TempDir()
	var dsns []string
	for _, m := range secretOf {
		secret := string(m[1])
		data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose", "secrets", secret))
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		db := strings.TrimPrefix(u.Path, "/")
		// N.B. the bed's databases are the compose ones, under names of
		// this test's own (the bed is shared): fleet-init.sql's CREATE
		// DATABASE finds them there.
		dsn := b.NewDatabase(t)
		bu, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		sql = regexp.MustCompile(`\b`+regexp.QuoteMeta(db)+`\b`).ReplaceAllString(sql, strings.TrimPrefix(bu.Path, "/"))
		local := filepath.Join(dir, secret)
		if err := os.WriteFile(local, []byte(dsn+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		file = strings.ReplaceAll(file, "/run/secrets/"+secret, local)
		dsns = append(dsns, dsn)
	}
	// Slots are per cluster and the group's topic per Kafka: this test's own.
	file = regexp.MustCompile(`(?m)^(\s*slot: *)(\S+)`).ReplaceAllString(file, "${1}${2}_"+uniq)
	file = regexp.MustCompile(`(?m)^group: *(\S+)`).ReplaceAllString(file, "group: ${1}_"+uniq)
	config := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(config, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	sqlFile := filepath.Join(dir, "fleet-init.sql")
	if err := os.WriteFile(sqlFile, []byte(sql), 0o600); err != nil {
		t.Fatal(err)
	}
	psql(t, dsns[0], sqlFile)
	// Twice, as every `docker compose up` runs it.
	psql(t, dsns[0], sqlFile)

	var c fleetCompose
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	var replicas []*relayProc
	var instances []string
	for _, name := range []string{fleetReplicaPrefix + "1", fleetReplicaPrefix + "2"} {
		inst := c.Services[name].Environment["WALRELAY_FLEET_INSTANCE"]
		if inst == "" {
			t.Fatalf("docker-compose.yml %s: no WALRELAY_FLEET_INSTANCE", name)
		}
		env := map[string]string{
			"WALRELAY_CONFIG":         config,
			"WALRELAY_FLEET_INSTANCE": inst,
			"WALRELAY_BROKERS":        strings.Join(b.Brokers(), ","),
			"WALRELAY_HTTP_ADDR":      freeAddr(t),
		}
		replicas = append(replicas, startRelay(t, name, env))
		instances = append(instances, inst)
	}
	names := regexp.MustCompile(`(?m)^\s*- name: *(\S+)`).FindAllStringSubmatch(file, -1)
	var pipelines []string
	for _, n := range names {
		pipelines = append(pipelines, n[1])
	}

	// Each pipeline streams on exactly one replica, both replicas ready.
	waitFor(t, replicas[0], 90*time.Second, "each pipeline streaming on one replica", func() error {
		if !replicas[1].running() {
			return fmt.Errorf("%s exited: %v", instances[1], replicas[1].err)
		}
		return ownedOnce(replicas, instances, pipelines)
	})
	for i, dsn := range dsns {
		relayed(t, b, dsn, fmt.Sprintf("order_%s_%d", uniq, i), "1")
	}

	// SIGTERM of the first: exit 0, its pipelines streaming on the second.
	if code := replicas[0].stop(t); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM, want 0", instances[0], code)
	}
	waitFor(t, replicas[1], 90*time.Second, "every pipeline streaming on "+instances[1], func() error {
		return ownedOnce(replicas[1:], instances[1:], pipelines)
	})
	for i, dsn := range dsns {
		relayed(t, b, dsn, fmt.Sprintf("order_%s_%d", uniq, i), "2")
	}
}

// ownedOnce is nil when every pipeline streams, ready, on exactly one of
// replicas (each asked for its /pipelines), and each replica is ready.
func ownedOnce(replicas []*relayProc, instances, pipelines []string) error {
	owners := map[string][]string{}
	for i, r := range replicas {
		if got := httpStatus(r.addr, "/readyz"); got != http.StatusOK {
			return fmt.Errorf("%s: /readyz %d", instances[i], got)
		}
		list, err := getPipelines(r.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", instances[i], err)
		}
		for _, p := range list {
			if p.Owner == instances[i] && p.State == "streaming" && p.Ready {
				owners[p.Name] = append(owners[p.Name], instances[i])
			}
		}
	}
	for _, p := range pipelines {
		if len(owners[p]) != 1 {
			return fmt.Errorf("pipeline %s streams on %v, want one replica", p, owners[p])
		}
	}
	return nil
}

func getPipelines(addr string) ([]fleetPipeline, error) {
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get("http://" + addr + "/pipelines")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list []fleetPipeline
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /pipelines: %w", err)
	}
	return list, nil
}

// relayed writes an outbox event of aggregate type aggType and id key into
// the database of dsn and reads it back from its topic.
func relayed(t *testing.T, b *testbed.Bed, dsn, aggType, key string) {
	t.Helper()
	b.Exec(t, dsn, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
		VALUES (gen_random_uuid(), $1, $2, 'OrderCreated', '{"n": 1}')`, aggType, key)
	consumeKey(t, b, "outbox.event."+aggType, key)
}

// psql runs file with psql in the database of dsn, stopping at the first
// error, as docker-compose.yml's fleet-init does.
func psql(t *testing.T, dsn, file string) {
	t.Helper()
	bin, err := exec.LookPath("psql")
	if err != nil {
		bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
		if len(bins) == 0 {
			t.Fatalf("no psql: %v", err)
		}
		bin = bins[len(bins)-1]
	}
	out, err := exec.Command(bin, "-X", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", file).CombinedOutput()
	if err != nil {
		t.Fatalf("psql -f fleet-init.sql: %v\n%s", err, out)
	}
}
