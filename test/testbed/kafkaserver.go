package testbed

import (
	"archive/zip"
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/kafka"
)

const (
	javaInstallHint  = "apt-get install -y openjdk-17-jre-headless"
	mvnInstallHint   = "apt-get install -y maven"
	kafkaReadyWithin = 90 * time.Second
)

// kafkaJars returns the directory of the broker's jars, fetching them with
// mvn into ${XDG_CACHE_HOME:-$HOME/.cache}/walrelay/kafka-VERSION the first
// time. A marker file holding the pom's SHA-256 is written last, so an
// interrupted or outdated download is redone; a lock keeps two processes from
// downloading at once.
func kafkaJars(ctx context.Context, logf func(string, ...any)) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		root = filepath.Join(os.TempDir(), "walrelay-cache")
	}
	base := filepath.Join(root, "walrelay")
	dir := filepath.Join(base, "kafka-"+kafka.Version)
	libs := filepath.Join(dir, "libs")
	marker := filepath.Join(dir, "complete")
	sum := sha256.Sum256(kafka.POM)
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
	lockPath := dir + ".lock"
	release, err := lockFile(lockPath, syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		logf("testbed: waiting for another process fetching the Kafka jars (%s)", lockPath)
		if release, err = lockFile(lockPath, syscall.LOCK_EX); err != nil {
			return "", err
		}
	}
	defer release()
	if done() {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("mvn not found in PATH (needed once, to fetch Kafka %s's jars from Maven Central into %s): %s", kafka.Version, dir, mvnInstallHint)
	}
	logf("testbed: fetching Kafka %s jars with mvn into %s (once)", kafka.Version, libs)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pom := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pom, kafka.POM, 0o644); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-Dstyle.color=never", "-f", pom,
		"dependency:copy-dependencies", "-DoutputDirectory="+libs, "-DincludeScope=runtime")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fetch Kafka jars: mvn: %w\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+kafka.Version+".jar")); err != nil {
		return "", fmt.Errorf("fetch Kafka jars: mvn left no kafka_2.13-%s.jar in %s", kafka.Version, libs)
	}
	if err := writeFileAtomic(marker, []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	return libs, nil
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
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java not found in PATH (Kafka %s needs Java 17 or newer): %s", kafka.Version, javaInstallHint)
	}
	libs, err := kafkaJars(ctx, logf)
	if err != nil {
		return nil, err
	}
	kd := filepath.Join(dir, "kafka")
	st := &kafkaState{Java: java, Dir: kd, LibDir: libs, ClusterID: newClusterID()}
	if err := os.MkdirAll(kd, 0o755); err != nil {
		return nil, err
	}
	if st.Version, err = kafkaJarVersion(libs); err != nil {
		return nil, err
	}
	if st.Port, err = freePort(); err != nil {
		return nil, err
	}
	if st.ControllerPort, err = freePort(); err != nil {
		return nil, err
	}
	for st.ControllerPort == st.Port {
		if st.ControllerPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	st.Brokers = []string{fmt.Sprintf("127.0.0.1:%d", st.Port)}
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", st.Port, st.ControllerPort)
	advertised := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", st.Port)
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	var secConfig string
	var scramArgs []string
	if sec != nil {
		for st.SASLPort == 0 || st.SASLPort == st.Port || st.SASLPort == st.ControllerPort {
			if st.SASLPort, err = freePort(); err != nil {
				return nil, err
			}
		}
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
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
# walrelay's tests send records of 1 MB and more.
message.max.bytes=16777216
replica.fetch.max.bytes=16777216
`, st.Port, st.ControllerPort, filepath.Join(kd, "data"), listeners, advertised, protocols) + secConfig
	if err := st.prepare(ctx, config, heapMB, scramArgs); err != nil {
		return nil, err
	}
	if err := st.launch(ctx, detached); err != nil {
		return nil, err
	}
	return st, nil
}

// prepare writes a node's config (and log4j2.properties) into st.Dir,
// formats its KRaft storage and sets st.Args. heapMB is the JVM's maximum
// heap (0: 768).
func (st *kafkaState) prepare(ctx context.Context, config string, heapMB int, scramArgs []string) error {
	kd := st.Dir
	st.ConfigPath = filepath.Join(kd, "server.properties")
	st.Log4jConfig = filepath.Join(kd, "log4j2.properties")
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
	if err := os.WriteFile(st.Log4jConfig, kafka.Log4j2, 0o644); err != nil {
		return err
	}
	classpath := filepath.Join(st.LibDir, "*") // expanded by the java launcher
	// N.B. with a static controller.quorum.voters the storage tool wants
	// neither --standalone nor --initial-controllers.
	format := exec.CommandContext(ctx, st.Java, append([]string{"-Dlog4j2.configurationFile=" + st.Log4jConfig,
		"-Dkafka.logs.dir=" + filepath.Join(kd, "logs"), "-XX:TieredStopAtLevel=1", "-cp", classpath,
		"kafka.tools.StorageTool", "format", "-t", st.ClusterID, "-c", st.ConfigPath}, scramArgs...)...)
	format.Dir = kd
	if out, err := format.CombinedOutput(); err != nil {
		return fmt.Errorf("format Kafka storage: %w\n%s", err, out)
	}
	if heapMB <= 0 {
		heapMB = 768
	}
	jvm := []string{
		fmt.Sprintf("-Xms%dm", min(256, heapMB)), fmt.Sprintf("-Xmx%dm", heapMB), "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		// C1 only: the broker starts in about half the CPU time on two
		// cores; tests never need its peak throughput.
		"-XX:TieredStopAtLevel=1",
	}
	if os.Getenv(EnvKafkaStockJVM) != "" {
		// The JVM options of Kafka's own bin/kafka-server-start.sh and
		// kafka-run-class.sh, for benchmarks.
		jvm = []string{"-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
			"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"}
	}
	st.Args = append(jvm,
		"-Djava.awt.headless=true",
		"-Dkafka.logs.dir="+filepath.Join(kd, "logs"),
		"-Dlog4j2.configurationFile="+st.Log4jConfig,
		"-cp", classpath,
		"kafka.Kafka", st.ConfigPath,
	)
	return nil
}

// launch starts the broker with st.Args, records its pid in st.PIDFile and
// waits until it answers metadata requests.
func (st *kafkaState) launch(ctx context.Context, detached bool) error {
	out, err := os.OpenFile(st.StdoutPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child holds its own descriptor
	cmd := exec.Command(st.Java, st.Args...)
	cmd.Dir = st.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procAttr(detached, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start Kafka: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := writeFileAtomic(st.PIDFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	if err := st.waitReady(ctx, exited); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

func (st *kafkaState) waitReady(ctx context.Context, exited <-chan error) error {
	if st.Roles == "controller" {
		return st.controllerReady(ctx, exited)
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
		case err := <-exited:
			return fmt.Errorf("kafka exited during startup (%v)%s", err, st.logTails(40))
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
	s := fmt.Sprintf("; last lines of %s:\n%s", st.LogPath, tail(st.LogPath, n))
	if fi, err := os.Stat(st.StdoutPath); err == nil && fi.Size() > 0 {
		s += fmt.Sprintf("\nlast lines of %s:\n%s", st.StdoutPath, tail(st.StdoutPath, n))
	}
	return s
}

func (st *kafkaState) pid() int {
	b, err := os.ReadFile(st.PIDFile)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func (st *kafkaState) running() bool { return alive(st.pid(), st.ConfigPath) }

// stop sends the broker SIGTERM (a clean shutdown) and SIGKILL if it has not
// exited after 20 s. A broker that is not running is not an error.
func (st *kafkaState) stop() error {
	pid := st.pid()
	if !alive(pid, st.ConfigPath) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop Kafka: %w", err)
	}
	if waitGone(pid, st.ConfigPath, 20*time.Second) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, st.ConfigPath, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("stop Kafka: pid %d still running after SIGKILL", pid)
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
