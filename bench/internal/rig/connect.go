package rig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/bench/connect"
)

// ConnectJars returns the directory of Kafka Connect's and Debezium's jars,
// fetching them with mvn (bench/connect/pom.xml) into
// ${XDG_CACHE_HOME:-~/.cache}/walrelay/connect-V-debezium-V the first time.
// A marker holding the pom's SHA-256 is written last, so an interrupted or
// outdated download is redone; a lock keeps two processes from fetching at
// once.
func ConnectJars(ctx context.Context, logf func(string, ...any)) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		root = filepath.Join(os.TempDir(), "walrelay-cache")
	}
	base := filepath.Join(root, "walrelay")
	dir := filepath.Join(base, "connect-"+connect.KafkaVersion+"-debezium-"+connect.DebeziumVersion)
	libs := filepath.Join(dir, "libs")
	marker := filepath.Join(dir, "complete")
	sum := sha256.Sum256(connect.POM)
	want := hex.EncodeToString(sum[:])
	done := func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && strings.TrimSpace(string(b)) == want
	}
	if done() {
		return libs, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if done() {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("mvn not found in PATH (needed once, to fetch Kafka Connect and Debezium jars from Maven Central into %s): apt-get install -y maven", dir)
	}
	logf("fetching Kafka Connect %s and Debezium %s jars with mvn into %s (once)", connect.KafkaVersion, connect.DebeziumVersion, libs)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pom := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pom, connect.POM, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-Dstyle.color=never", "-f", pom,
		"dependency:copy-dependencies", "-DoutputDirectory="+libs, "-DincludeScope=runtime")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fetch Connect jars: mvn: %w\n%s", err, out)
	}
	for _, j := range []string{"connect-runtime-" + connect.KafkaVersion + ".jar", "debezium-connector-postgres-" + connect.DebeziumVersion + ".jar"} {
		if _, err := os.Stat(filepath.Join(libs, j)); err != nil {
			return "", fmt.Errorf("fetch Connect jars: mvn left no %s in %s", j, libs)
		}
	}
	if err := os.WriteFile(marker, []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	return libs, nil
}

// ConnectJVMOptions are the options Kafka's bin/connect-standalone.sh gives
// the JVM by default (KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS of
// kafka-run-class.sh): what a user who starts Debezium that way runs.
var ConnectJVMOptions = []string{
	"-Xms256M", "-Xmx2G",
	"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
}

// ConnectWorker is a Kafka Connect standalone worker.
type ConnectWorker struct {
	Proc     *Proc
	Dir      string
	RESTURL  string
	Ready    time.Duration // from launch until the REST API answered
	ReadyCPU float64       // CPU seconds spent until then
	http     *http.Client
}

// FreePort returns a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WriteProperties writes a Java properties file in key order.
func WriteProperties(path string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := strings.ReplaceAll(props[k], `\`, `\\`)
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// StartConnect starts a standalone worker in dir with props (bootstrap
// servers, converters, offsets file and REST listener are filled in unless
// given) and waits up to 3 minutes until its REST API answers. Connectors are
// created through the REST API.
func StartConnect(ctx context.Context, libs, dir string, brokers []string, props map[string]string) (*ConnectWorker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	all := map[string]string{
		"bootstrap.servers":            strings.Join(brokers, ","),
		"offset.storage.file.filename": filepath.Join(dir, "offsets"),
		"listeners":                    "http://127.0.0.1:" + strconv.Itoa(port),
		"rest.advertised.host.name":    "127.0.0.1",
		// Plugins are on the class path and declare themselves in
		// META-INF/services: no scan of every jar at start-up.
		"plugin.discovery": "service_load",
	}
	for k, v := range props {
		all[k] = v
	}
	workerProps := filepath.Join(dir, "worker.properties")
	if err := WriteProperties(workerProps, all); err != nil {
		return nil, err
	}
	log4j := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(log4j, connect.Log4j2, 0o644); err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java not found in PATH (Kafka Connect needs Java 17 or newer): apt-get install -y openjdk-17-jre-headless")
	}
	args := append([]string{java}, ConnectJVMOptions...)
	args = append(args,
		"-Dconnect.logs.dir="+dir,
		"-Dlog4j2.configurationFile="+log4j,
		"-cp", filepath.Join(libs, "*"),
		"org.apache.kafka.connect.cli.ConnectStandalone", workerProps)
	p, err := StartProc("kafka-connect", filepath.Join(dir, "stdout.log"), nil, args...)
	if err != nil {
		return nil, err
	}
	w := &ConnectWorker{Proc: p, Dir: dir, RESTURL: "http://127.0.0.1:" + strconv.Itoa(port), http: &http.Client{Timeout: 2 * time.Minute}}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := w.http.Get(w.RESTURL + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if p.Exited() {
			return nil, fmt.Errorf("kafka connect exited during start-up (%v); last lines of %s:\n%s\n%s", p.Err(), p.LogPath, p.Tail(30), Tail(filepath.Join(dir, "connect.log"), 30))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Kill()
			return nil, fmt.Errorf("kafka connect's REST API did not answer within 3 minutes: %w", ErrTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.Ready = time.Since(p.Started)
	w.ReadyCPU = p.CPU()
	return w, nil
}

// LogPath is the worker's log.
func (w *ConnectWorker) LogPath() string { return filepath.Join(w.Dir, "connect.log") }

func (w *ConnectWorker) do(ctx context.Context, method, path string, body any) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.RESTURL+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return b, resp.StatusCode, err
}

// CreateConnector creates (and so starts) a connector.
func (w *ConnectWorker) CreateConnector(ctx context.Context, name string, cfg map[string]string) error {
	b, code, err := w.do(ctx, http.MethodPost, "/connectors", map[string]any{"name": name, "config": cfg})
	if err != nil {
		return fmt.Errorf("create connector %s: %w", name, err)
	}
	if code != http.StatusCreated && code != http.StatusOK {
		return fmt.Errorf("create connector %s: HTTP %d: %s", name, code, b)
	}
	return nil
}

// TaskState returns the state of the connector's first task (RUNNING,
// FAILED, ... or "" while it has none) and a failed task's trace.
func (w *ConnectWorker) TaskState(ctx context.Context, name string) (string, string, error) {
	b, code, err := w.do(ctx, http.MethodGet, "/connectors/"+name+"/status", nil)
	if err != nil {
		return "", "", err
	}
	if code == http.StatusNotFound {
		return "", "", nil
	}
	if code != http.StatusOK {
		return "", "", fmt.Errorf("connector %s status: HTTP %d: %s", name, code, b)
	}
	var st struct {
		Connector struct{ State, Trace string }
		Tasks     []struct{ State, Trace string }
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return "", "", err
	}
	if st.Connector.State == "FAILED" {
		return "FAILED", st.Connector.Trace, nil
	}
	if len(st.Tasks) == 0 {
		return "", "", nil
	}
	return st.Tasks[0].State, st.Tasks[0].Trace, nil
}

// Stop stops the worker (SIGTERM: connectors stop and commit offsets). The
// JVM's exit status after SIGTERM, 143, is a clean stop.
func (w *ConnectWorker) Stop() error {
	err := w.Proc.Stop(60 * time.Second)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 143 {
		return nil
	}
	return err
}
