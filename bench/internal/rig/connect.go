package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/bench/connect"
	"github.com/walrelay/walrelay/test/jvm"
	"github.com/walrelay/walrelay/test/proc"
)

// ConnectJars returns the directory of Kafka Connect's and Debezium's jars,
// fetching them with mvn (bench/connect/pom.xml) into
// ${XDG_CACHE_HOME:-~/.cache}/walrelay/connect-V-debezium-V the first time.
func ConnectJars(ctx context.Context, logf func(string, ...any)) (string, error) {
	return jvm.Jars{
		Name: "Kafka Connect " + connect.KafkaVersion + " and Debezium " + connect.DebeziumVersion,
		Dir:  "connect-" + connect.KafkaVersion + "-debezium-" + connect.DebeziumVersion,
		POM:  connect.POM,
		Want: []string{"connect-runtime-" + connect.KafkaVersion + ".jar", "debezium-connector-postgres-" + connect.DebeziumVersion + ".jar"},
	}.Fetch(ctx, logf)
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
	Proc     *proc.Proc
	Dir      string
	RESTURL  string
	Ready    time.Duration // from launch until the REST API answered
	ReadyCPU float64       // CPU seconds spent until then
	http     *http.Client
}

// StartConnect starts a standalone worker in dir with props (bootstrap
// servers, converters, offsets file and REST listener are filled in unless
// given) and waits up to 3 minutes until its REST API answers. Connectors are
// created through the REST API.
func StartConnect(ctx context.Context, libs, dir string, brokers []string, props map[string]string) (*ConnectWorker, error) {
	return StartConnectJVM(ctx, libs, dir, brokers, props, nil)
}

// StartConnectJVM is StartConnect with the JVM's system properties sys
// (name=value) besides the logging ones.
func StartConnectJVM(ctx context.Context, libs, dir string, brokers []string, props map[string]string, sys []string) (*ConnectWorker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
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
	if err := jvm.WriteProperties(workerProps, all); err != nil {
		return nil, err
	}
	logs, err := jvm.Log4j2(dir, connect.Log4j2, "connect.logs.dir", dir)
	if err != nil {
		return nil, err
	}
	java, err := jvm.Find("Kafka Connect")
	if err != nil {
		return nil, err
	}
	p, err := jvm.Command{
		Options: ConnectJVMOptions, Props: append(logs, sys...), Libs: libs,
		Main: "org.apache.kafka.connect.cli.ConnectStandalone", Args: []string{workerProps},
	}.Start(java, proc.Options{Name: "kafka-connect", Log: filepath.Join(dir, "stdout.log"), Group: true, Sample: true})
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
			return nil, fmt.Errorf("kafka connect exited during start-up (%v); last lines of %s:\n%s\n%s", p.Err(), p.LogPath, p.Tail(30), proc.Tail(filepath.Join(dir, "connect.log"), 30))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = p.Kill()
			return nil, fmt.Errorf("kafka connect's REST API did not answer within 3 minutes: %w", proc.ErrTimeout)
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

// DeleteConnector stops and removes a connector: its task stops and
// commits its offsets (for Debezium: the slot is confirmed up to them).
func (w *ConnectWorker) DeleteConnector(ctx context.Context, name string) error {
	b, code, err := w.do(ctx, http.MethodDelete, "/connectors/"+name, nil)
	if err != nil {
		return fmt.Errorf("delete connector %s: %w", name, err)
	}
	if code != http.StatusNoContent && code != http.StatusOK {
		return fmt.Errorf("delete connector %s: HTTP %d: %s", name, code, b)
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
