package testbed

import (
	"archive/zip"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/jvm"
	"github.com/walrelay/walrelay/test/kafka"
	"github.com/walrelay/walrelay/test/proc"
)

// kafkaReadyWithin bounds a broker's start. A restart loads every
// partition's log first: after a whole make test the bed's broker holds
// about a thousand, which took more than 90 s on two busy cores (load 36).
const kafkaReadyWithin = 5 * time.Minute

// kafkaJars are the broker's jars, fetched with mvn into
// ${XDG_CACHE_HOME:-$HOME/.cache}/walrelay/kafka-VERSION the first time.
var kafkaJars = jvm.Jars{
	Name: "Kafka " + kafka.Version,
	Dir:  "kafka-" + kafka.Version,
	POM:  kafka.POM,
	Want: []string{"kafka_2.13-" + kafka.Version + ".jar"},
}

// kafkaInstall finds java and the broker's jars (fetching them the first
// time) and reads the version they are.
func kafkaInstall(ctx context.Context, logf func(string, ...any)) (java, libs, version string, err error) {
	if java, err = jvm.Find("Kafka " + kafka.Version); err != nil {
		return "", "", "", err
	}
	if libs, err = kafkaJars.Fetch(ctx, func(f string, a ...any) { logf("testbed: "+f, a...) }); err != nil {
		return "", "", "", err
	}
	if version, err = kafkaJarVersion(libs); err != nil {
		return "", "", "", err
	}
	return java, libs, version, nil
}

// kafkaJarVersion reads the version kafka-clients was built as.
func kafkaJarVersion(libs string) (string, error) {
	jars, _ := filepath.Glob(filepath.Join(libs, "kafka-clients-*.jar"))
	if len(jars) != 1 {
		return "", fmt.Errorf("expected one kafka-clients jar in %s, found %d", libs, len(jars))
	}
	zr, err := zip.OpenReader(jars[0])
	if err != nil {
		return "", err
	}
	defer zr.Close()
	f, err := zr.Open("kafka/kafka-version.properties")
	if err != nil {
		return "", fmt.Errorf("read version of %s: %w", jars[0], err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "version="); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no version= in kafka-version.properties of %s", jars[0])
}

// newClusterID returns a random KRaft cluster id: 16 bytes, URL-safe base64
// without padding (22 characters), like Kafka's Uuid.randomUuid.
func newClusterID() string {
	for {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		id := base64.RawURLEncoding.EncodeToString(b)
		// N.B. Kafka never hands out an id starting with '-': the storage
		// tool's argument parser would read it as an option.
		if id[0] != '-' {
			return id
		}
	}
}

// startKafka formats KRaft storage under dir/kafka and starts a single node
// that is broker and controller, with a SASL_SSL listener when sec is set.
// heapMB is the JVM's maximum heap (0: 768).
func startKafka(ctx context.Context, dir string, detached bool, sec *KafkaSecurity, heapMB int, logf func(string, ...any)) (*kafkaState, error) {
	java, libs, version, err := kafkaInstall(ctx, logf)
	if err != nil {
		return nil, err
	}
	kd := filepath.Join(dir, "kafka")
	st := &kafkaState{Java: java, Dir: kd, LibDir: libs, ClusterID: newClusterID(), Version: version}
	if err := os.MkdirAll(kd, 0o755); err != nil {
		return nil, err
	}
	nports := 2
	if sec != nil {
		nports = 3
	}
	ports, err := freePorts(nports)
	if err != nil {
		return nil, err
	}
	st.Port, st.ControllerPort = ports[0], ports[1]
	st.Brokers = []string{fmt.Sprintf("127.0.0.1:%d", st.Port)}
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", st.Port, st.ControllerPort)
	advertised := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", st.Port)
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	var secConfig string
	var scramArgs []string
	if sec != nil {
		st.SASLPort = ports[2]
		st.SecureBrokers = []string{fmt.Sprintf("127.0.0.1:%d", st.SASLPort)}
		listeners += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", st.SASLPort)
		advertised += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", st.SASLPort)
		protocols += ",SASL_SSL:SASL_SSL"
		if secConfig, scramArgs, err = sec.brokerConfig(kd); err != nil {
			return nil, err
		}
	}
	config := fmt.Sprintf(`# Written by walrelay's test bed: a single KRaft node, broker and controller.
node.id=1
process.roles=broker,controller
listeners=%[4]s
advertised.listeners=%[5]s
listener.security.protocol.map=%[6]s
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:%[2]d
log.dirs=%[3]s
# One node: fencing it protects no other replica, and a starved JVM on a
# busy 2-core machine missed the default 9 s session (make test: "Fencing
# broker 1 ... because its session has timed out" after a 4.5 s controller
# event; 70 s without a leader), failing tests that meant no fault.
broker.session.timeout.ms=60000
`, st.Port, st.ControllerPort, filepath.Join(kd, "data"), listeners, advertised, protocols) + kafkaDefaults(1, 1) + secConfig
	if err := st.prepare(ctx, config, heapMB, scramArgs); err != nil {
		return nil, err
	}
	if err := st.launch(ctx, detached); err != nil {
		return nil, err
	}
	return st, nil
}

// kafkaDefaults are the settings every node of the bed shares: topics and
// the internal topics with replication factor rf and min.insync.replicas
// minISR, topics created only on request, records up to 16 MiB.
func kafkaDefaults(rf, minISR int) string {
	return fmt.Sprintf(`num.partitions=1
default.replication.factor=%[1]d
min.insync.replicas=%[2]d
unclean.leader.election.enable=false
offsets.topic.replication.factor=%[1]d
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=%[1]d
transaction.state.log.min.isr=%[2]d
share.coordinator.state.topic.replication.factor=%[1]d
share.coordinator.state.topic.min.isr=%[2]d
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
# walrelay's tests send records of 1 MB and more.
message.max.bytes=16777216
replica.fetch.max.bytes=16777216
`, rf, minISR)
}

// prepare writes a node's config (and log4j2.properties) into st.Dir,
// formats its KRaft storage and sets st.Args. heapMB is the JVM's maximum
// heap (0: 768).
func (st *kafkaState) prepare(ctx context.Context, config string, heapMB int, scramArgs []string) error {
	kd := st.Dir
	st.ConfigPath = filepath.Join(kd, "server.properties")
	st.Log4jConfig = filepath.Join(kd, "log4j2.properties") // written by jvm.Log4j2
	st.PIDFile = filepath.Join(kd, "kafka.pid")
	st.LogPath = filepath.Join(kd, "logs", "server.log")
	st.StdoutPath = filepath.Join(kd, "logs", "stdout.log")
	for _, d := range []string{filepath.Join(kd, "data"), filepath.Join(kd, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(st.ConfigPath, []byte(config), 0o644); err != nil {
		return err
	}
	logs, err := jvm.Log4j2(kd, kafka.Log4j2, "kafka.logs.dir", filepath.Join(kd, "logs"))
	if err != nil {
		return err
	}
	// N.B. with a static controller.quorum.voters the storage tool wants
	// neither --standalone nor --initial-controllers.
	format := exec.CommandContext(ctx, st.Java, jvm.Command{
		Options: []string{"-XX:TieredStopAtLevel=1"}, Props: logs, Libs: st.LibDir,
		Main: "kafka.tools.StorageTool", Args: append([]string{"format", "-t", st.ClusterID, "-c", st.ConfigPath}, scramArgs...),
	}.Argv()...)
	format.Dir = kd
	if out, err := format.CombinedOutput(); err != nil {
		return fmt.Errorf("format Kafka storage: %w\n%s", err, out)
	}
	if heapMB <= 0 {
		heapMB = 768
	}
	opts := append(jvm.Heap(min(256, heapMB), heapMB), "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		// C1 only: the broker starts in about half the CPU time on two
		// cores; tests never need its peak throughput.
		"-XX:TieredStopAtLevel=1",
	)
	if os.Getenv(EnvKafkaStockJVM) != "" {
		// The JVM options of Kafka's own bin/kafka-server-start.sh and
		// kafka-run-class.sh, for benchmarks.
		opts = []string{"-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
			"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"}
	}
	st.Args = jvm.Command{
		Options: opts, Props: append([]string{"java.awt.headless=true"}, logs...), Libs: st.LibDir,
		Main: "kafka.Kafka", Args: []string{st.ConfigPath},
	}.Argv()
	return nil
}

// launch starts the broker with st.Args, records its pid in st.PIDFile and
// waits until it answers metadata requests.
func (st *kafkaState) launch(ctx context.Context, detached bool) error {
	p, err := proc.Start(proc.Options{Name: "Kafka", Path: st.Java, Args: st.Args, Dir: st.Dir, Log: st.StdoutPath,
		Detached: detached, Group: true})
	if err != nil {
		return err
	}
	if err := proc.WriteFileAtomic(st.PIDFile, []byte(strconv.Itoa(p.Pid())+"\n"), 0o644); err != nil {
		_ = p.Kill()
		return err
	}
	if err := st.waitReady(ctx, p); err != nil {
		_ = p.Kill()
		return err
	}
	return nil
}

func (st *kafkaState) waitReady(ctx context.Context, p *proc.Proc) error {
	if st.Roles == "controller" {
		return st.controllerReady(ctx, p)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...), kgo.DialTimeout(2*time.Second), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, kafkaReadyWithin)
	defer cancel()
	var lastErr error
	for {
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		brokers, err := adm.ListBrokers(actx)
		acancel()
		// N.B. a broker of a cluster is ready when it lists itself: it has
		// caught up with the metadata and is unfenced.
		if err == nil && len(brokers) > 0 && (st.Roles != "broker" || slices.ContainsFunc(brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == int32(st.NodeID) })) {
			return nil
		}
		if err == nil {
			err = errors.New("metadata lists no broker")
		}
		lastErr = err
		select {
		case <-p.Done():
			return fmt.Errorf("kafka exited during startup (%v)%s", p.Err(), st.logTails(40))
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return fmt.Errorf("wait for Kafka: %w", ctx.Err())
			}
			return fmt.Errorf("kafka at %s did not answer metadata requests within %s (%v)%s", st.Brokers[0], kafkaReadyWithin, lastErr, st.logTails(40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logTails returns the last n lines of the broker's log and, if the JVM
// printed anything, of its stdout.
func (st *kafkaState) logTails(n int) string {
	s := fmt.Sprintf("; last lines of %s:\n%s", st.LogPath, proc.Tail(st.LogPath, n))
	if fi, err := os.Stat(st.StdoutPath); err == nil && fi.Size() > 0 {
		s += fmt.Sprintf("\nlast lines of %s:\n%s", st.StdoutPath, proc.Tail(st.StdoutPath, n))
	}
	return s
}

func (st *kafkaState) pid() int { return proc.ReadPIDFile(st.PIDFile) }

func (st *kafkaState) running() bool { return proc.Alive(st.pid(), st.ConfigPath) }

// stop sends the broker SIGTERM (a clean shutdown) and SIGKILL if it has not
// exited after 20 s. A broker that is not running is not an error.
func (st *kafkaState) stop() error {
	if err := proc.StopPID(st.pid(), st.ConfigPath, 20*time.Second); err != nil {
		return fmt.Errorf("stop Kafka: %w", err)
	}
	return nil
}

// kafkaServerVersion asks a broker we did not start for its version: Kafka
// does not report it, so this is franz-go's guess from the API versions
// (e.g. "v4.0").
func kafkaServerVersion(ctx context.Context, brokers []string) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return "", fmt.Errorf("ask Kafka at %s for API versions: %w", strings.Join(brokers, ","), err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return "", fmt.Errorf("ask Kafka at %s for API versions: %w", strings.Join(brokers, ","), v.Err)
		}
		return v.VersionGuess(), nil
	}
	return "", fmt.Errorf("Kafka at %s answered no API versions", strings.Join(brokers, ","))
}
