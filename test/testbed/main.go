package testbed

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/proc"
)

// pkgBed is the bed of this test binary (one package run).
var pkgBed struct {
	mainCalled bool
	disruptive bool

	once sync.Once
	bed  *Bed
	err  error

	dumpOnFailure sync.Map // testing.TB -> struct{}: a log dump is registered

	// In a MainDisruptive package: each test that calls Get holds the bed's
	// lock shared (one descriptor for the process, counted per test), so that
	// another package's Disrupt cannot stop a server under it; Disrupt trades
	// it for the exclusive lock.
	lockMu     sync.Mutex
	held       map[testing.TB]bool
	sharedLock func() // release of the process's shared lock, nil if not held
	disruptMu  sync.Mutex
	disrupting bool
}

// Main runs the package's tests against a bed; use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }
//
// It uses the servers named by WALRELAY_TEST_PG_URL and
// WALRELAY_TEST_KAFKA_BROKERS (with WALRELAY_TEST_BED_DIR, the bed of the
// testbed command that `make test` runs); for each one that is not set it
// starts a server of its own when the first test calls Get, and stops it when
// the tests are done. For the whole run it holds a shared lock on the bed, so
// no other package's Disrupt stops a server under its tests.
func Main(m *testing.M) int { return runMain(m, false) }

// MainDisruptive is Main for a package whose tests stop or restart the
// servers (see Disrupt). It takes no package-wide lock: each test holds the
// shared lock from its Get to its end, and a test that calls Disrupt holds
// the exclusive one instead.
func MainDisruptive(m *testing.M) int { return runMain(m, true) }

func runMain(m *testing.M, disruptive bool) int {
	pkgBed.mainCalled = true
	pkgBed.disruptive = disruptive
	if !flag.Parsed() {
		flag.Parse()
	}
	if dir := os.Getenv(EnvBedDir); dir != "" && !disruptive && !listOnly() {
		st, err := readState(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testbed: %s=%s: %v\n", EnvBedDir, dir, err)
			return 1
		}
		release, err := proc.LockFile(st.LockPath, syscall.LOCK_SH)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
			return 1
		}
		defer release()
	}
	code := m.Run()
	if err := stopPackageCluster(); err != nil {
		fmt.Fprintf(os.Stderr, "testbed: stop the package's Kafka cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if b := pkgBed.bed; b != nil {
		if err := b.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: stop: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// listOnly reports whether the binary only lists tests (go test -list).
func listOnly() bool {
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}

// Get returns the package's bed, starting its servers on first use. It fails
// the test if the package's TestMain does not call Main or MainDisruptive, or
// if a server cannot start (the message names what to install). When the
// test fails, the last lines of the managed servers' logs are logged.
func Get(t testing.TB) *Bed {
	t.Helper()
	b := getBed(t)
	if pkgBed.disruptive {
		b.holdShared(t)
	}
	return b
}

func getBed(t testing.TB) *Bed {
	t.Helper()
	if !pkgBed.mainCalled {
		t.Fatal("testbed.Get: the package's TestMain must call testbed.Main (or MainDisruptive): func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }")
	}
	pkgBed.once.Do(func() { pkgBed.bed, pkgBed.err = openFromEnv(context.Background()) })
	if pkgBed.err != nil {
		t.Fatalf("testbed: %v", pkgBed.err)
	}
	b := pkgBed.bed
	if _, loaded := pkgBed.dumpOnFailure.LoadOrStore(t, struct{}{}); !loaded {
		t.Cleanup(func() {
			pkgBed.dumpOnFailure.Delete(t)
			if t.Failed() {
				b.dumpLogs(t)
			}
		})
	}
	return b
}

// openFromEnv returns the bed the environment names, starting the servers it
// does not name.
func openFromEnv(ctx context.Context) (*Bed, error) {
	pgURL := os.Getenv(EnvPGURL)
	var brokers []string
	if s := os.Getenv(EnvKafkaBrokers); s != "" {
		for _, br := range strings.Split(s, ",") {
			if br = strings.TrimSpace(br); br != "" {
				brokers = append(brokers, br)
			}
		}
	}
	var b *Bed
	var err error
	if dir := os.Getenv(EnvBedDir); dir != "" {
		b, err = openShared(dir)
	} else if pgURL == "" || len(brokers) == 0 {
		n, nerr := ParseKafkaBrokersN(os.Getenv(EnvKafkaBrokersN))
		if nerr != nil {
			return nil, nerr
		}
		b, err = Start(ctx, Options{PG: pgURL == "", Kafka: len(brokers) == 0, KafkaBrokers: n})
	} else {
		b = &Bed{logf: stderrf}
	}
	if err != nil {
		return nil, err
	}
	// A variable that names another server than the bed's makes it external.
	if pgURL != "" && pgURL != b.pgURL {
		b.pg, b.pgURL = nil, pgURL
		if b.pgVersion, err = pgServerVersion(ctx, pgURL); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvPGURL, err)
		}
	}
	if len(brokers) > 0 && strings.Join(brokers, ",") != strings.Join(b.brokers, ",") {
		b.kafka, b.cluster, b.brokers = nil, nil, brokers
		if b.kafkaVersion, err = kafkaServerVersion(ctx, brokers); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKafkaBrokers, err)
		}
	}
	// N.B. a run that asks for a version must not pass on another one (a
	// shared bed or external server started without the setting).
	if want := os.Getenv(EnvPGVersion); want != "" && b.pgURL != "" && pgMajor(b.pgVersion) != want {
		return nil, fmt.Errorf("%s=%s but the PostgreSQL server of this run is %s: start the bed with the same setting", EnvPGVersion, want, b.pgVersion)
	}
	if b.pgURL == "" || len(b.brokers) == 0 {
		return nil, fmt.Errorf("%s=%s names no PostgreSQL or no Kafka, and %s / %s do not either", EnvBedDir, b.Dir(), EnvPGURL, EnvKafkaBrokers)
	}
	if !b.owned || b.pg == nil || (b.kafka == nil && b.cluster == nil) { // Start logged a managed bed
		b.logf("testbed: %s", b.describe())
	}
	return b, nil
}

func (b *Bed) dumpLogs(t testing.TB) {
	t.Helper()
	if b.pg != nil {
		t.Logf("testbed: last lines of %s:\n%s", b.pg.LogPath, proc.Tail(b.pg.LogPath, 60))
	}
	if b.kafka != nil {
		t.Logf("testbed: last lines of %s:\n%s", b.kafka.LogPath, proc.Tail(b.kafka.LogPath, 60))
		if fi, err := os.Stat(b.kafka.StdoutPath); err == nil && fi.Size() > 0 {
			t.Logf("testbed: last lines of %s:\n%s", b.kafka.StdoutPath, proc.Tail(b.kafka.StdoutPath, 20))
		}
	}
	if b.cluster != nil {
		t.Logf("testbed: last lines of the Kafka cluster's logs:%s", b.cluster.logTails(30))
	}
}

// Disrupt declares that the test stops or restarts servers (StopKafka,
// StartKafka, RestartPostgres) or needs the servers to itself. It takes the
// bed's exclusive lock for the duration of the test, waiting until no other
// package's tests run, and restarts Kafka at the end if the test left it
// stopped. It is only allowed in a package whose TestMain calls
// MainDisruptive. A test that calls it must not call t.Parallel, so that Go
// runs it before the package's parallel tests (which are paused meanwhile).
// It fails the test when both servers are external: the test's fault or its
// exclusive use of the servers cannot be had, and a skip would report ok
// without running it.
func Disrupt(t testing.TB) {
	t.Helper()
	if !pkgBed.mainCalled || !pkgBed.disruptive {
		t.Fatal("testbed.Disrupt: only allowed in a package whose TestMain calls testbed.MainDisruptive (packages using testbed.Main hold a shared lock on the bed for their whole run)")
	}
	b := getBed(t)
	if b.pg == nil && b.kafka == nil && b.cluster == nil {
		t.Fatalf("testbed: %s: PostgreSQL (%s) and Kafka (%s) are external services, and this test stops, restarts or needs to itself servers the test bed manages; %s", t.Name(), EnvPGURL, EnvKafkaBrokers, runManaged)
	}
	pkgBed.disruptMu.Lock() // one disruptive test at a time, even if one calls t.Parallel
	release, err := b.lockExclusive(t)
	if err != nil {
		pkgBed.disruptMu.Unlock()
		t.Fatalf("testbed: %v", err)
	}
	b.disrupting.Store(true)
	t.Cleanup(func() {
		defer pkgBed.disruptMu.Unlock()
		defer b.unlockExclusive(release)
		defer b.disrupting.Store(false)
		if b.kafka != nil && b.kafkaDown.Load() {
			if err := b.startKafka(); err != nil {
				t.Errorf("testbed: restart Kafka the test left stopped: %v", err)
			}
		}
		if b.cluster != nil {
			if err := b.cluster.start(context.Background(), b.detached()); err != nil {
				t.Errorf("testbed: restart the Kafka nodes the test left stopped: %v", err)
			}
		}
	})
}

// holdShared makes t hold the bed's lock shared until it ends (in a
// MainDisruptive package). Tests of a disruptive test hold nothing more.
func (b *Bed) holdShared(t testing.TB) {
	t.Helper()
	if b.st == nil {
		return
	}
	pkgBed.lockMu.Lock()
	defer pkgBed.lockMu.Unlock()
	if pkgBed.disrupting || pkgBed.held[t] {
		return
	}
	if pkgBed.sharedLock == nil {
		release, err := proc.LockFile(b.st.LockPath, syscall.LOCK_SH)
		if err != nil {
			t.Fatalf("testbed: %v", err)
		}
		pkgBed.sharedLock = release
	}
	if pkgBed.held == nil {
		pkgBed.held = map[testing.TB]bool{}
	}
	pkgBed.held[t] = true
	t.Cleanup(func() {
		pkgBed.lockMu.Lock()
		defer pkgBed.lockMu.Unlock()
		delete(pkgBed.held, t)
		if len(pkgBed.held) == 0 && pkgBed.sharedLock != nil {
			pkgBed.sharedLock()
			pkgBed.sharedLock = nil
		}
	})
}

// lockExclusive drops the process's shared lock and takes the exclusive one.
//
// N.B. dropping it is safe: Disrupt runs in a sequential test, and while one
// runs no other test of the process runs; the tests that hold the shared lock
// are paused parallel tests (or called Get before t.Parallel).
func (b *Bed) lockExclusive(t testing.TB) (func(), error) {
	t.Helper()
	pkgBed.lockMu.Lock()
	defer pkgBed.lockMu.Unlock()
	pkgBed.disrupting = true
	if pkgBed.sharedLock != nil {
		pkgBed.sharedLock()
		pkgBed.sharedLock = nil
	}
	release, err := proc.LockFile(b.st.LockPath, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return release, nil
	}
	t.Logf("testbed: waiting for other packages' tests to finish (exclusive lock on %s)", b.st.LockPath)
	begin := time.Now()
	if release, err = proc.LockFile(b.st.LockPath, syscall.LOCK_EX); err != nil {
		pkgBed.disrupting = false
		return nil, err
	}
	t.Logf("testbed: got the exclusive lock after %.1fs", time.Since(begin).Seconds())
	return release, nil
}

// unlockExclusive releases the exclusive lock and takes the shared one again
// for the tests that hold it.
func (b *Bed) unlockExclusive(release func()) {
	pkgBed.lockMu.Lock()
	defer pkgBed.lockMu.Unlock()
	pkgBed.disrupting = false
	// N.B. release first: a second descriptor of this process cannot take the
	// shared lock while the first holds the exclusive one.
	release()
	if len(pkgBed.held) > 0 {
		shared, err := proc.LockFile(b.st.LockPath, syscall.LOCK_SH)
		if err != nil {
			b.logf("testbed: retake shared lock: %v", err)
			return
		}
		pkgBed.sharedLock = shared
	}
}

// requireDisrupt fails the test unless it called Disrupt.
func (b *Bed) requireDisrupt(t testing.TB, what string) {
	t.Helper()
	if !b.disrupting.Load() {
		t.Fatalf("testbed: %s: call testbed.Disrupt(t) first (in a package using testbed.MainDisruptive)", what)
	}
}
