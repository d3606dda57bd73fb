package testbed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/test/proc"
)

// Bed is a PostgreSQL server and a Kafka broker for tests, each either managed
// by the test bed (started from this machine's binaries, described in the
// bed's state.json) or external (given by WALRELAY_TEST_PG_URL /
// WALRELAY_TEST_KAFKA_BROKERS).
type Bed struct {
	pgURL        string
	brokers      []string
	pgVersion    string
	kafkaVersion string

	st    *state      // nil when both services are external
	pg    *pgState    // nil when PostgreSQL is external
	kafka *kafkaState // nil when Kafka is external or a cluster
	// cluster is the Kafka cluster the bed manages, nil when it is a single
	// node or external.
	cluster *kafkaCluster
	// private is set for a bed only its starting test (StartForTest) or
	// package (GetCluster) uses: stopping its servers needs no Disrupt.
	private bool
	// owned is set in the process that created the bed: Stop stops its
	// servers and removes its directory; servers it (re)starts die with it
	// unless the bed is kept.
	owned        bool
	releaseOwner func()
	logf         func(string, ...any)

	disrupting atomic.Bool // a test holds the exclusive lock (Disrupt)
	kafkaDown  atomic.Bool // StopKafka ran and StartKafka has not
}

// Options selects what Start launches.
type Options struct {
	// PG and Kafka select the servers to start.
	PG, Kafka bool
	// Keep leaves the servers running when this process exits: they get
	// sessions of their own and no parent-death signal, and the bed is never
	// reaped as stale. Stop them with Open(dir) and Stop.
	Keep bool
	// Logf prints progress; nil prints to stderr.
	Logf func(format string, args ...any)
	// PGSecurity, when set, makes PostgreSQL take TLS connections with SCRAM
	// passwords only; PGURL then uses them.
	PGSecurity *PGSecurity
	// KafkaSecurity, when set, gives Kafka a SASL_SSL listener as well
	// (SecureBrokers).
	KafkaSecurity *KafkaSecurity
	// KafkaHeapMB is the broker's maximum JVM heap; 0 means 768 (512 for
	// each broker of a cluster).
	KafkaHeapMB int
	// KafkaBrokers is the number of Kafka brokers: 0 or 1 starts one node
	// that is broker and controller; 3 to 9 a cluster of that many brokers
	// and three dedicated KRaft controllers, with default.replication.factor
	// 3, min.insync.replicas 2 and unclean.leader.election.enable=false
	// (KafkaSecurity is not supported there). EnvKafkaBrokersN sets it for
	// the testbed command and for a package's own bed.
	KafkaBrokers int
	// PGVersion is PostgreSQL's major version, "13" to "18" (13 for tests
	// of its refusal); "" means $WALRELAY_TEST_PG_VERSION (14 to 18), or the
	// machine's newest server when that is unset. A version the machine
	// lacks is fetched once (npm, else Maven).
	PGVersion string
}

func stderrf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Start creates a bed directory under os.TempDir() and starts the selected
// servers in it, concurrently. Stop stops them and removes the directory.
func Start(ctx context.Context, opt Options) (*Bed, error) {
	logf := opt.Logf
	if logf == nil {
		logf = stderrf
	}
	reapStale(logf)
	dir, err := os.MkdirTemp("", bedDirPattern)
	if err != nil {
		return nil, fmt.Errorf("create bed directory: %w", err)
	}
	// N.B. the postgres OS user must be able to traverse it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	releaseOwner, err := proc.LockFile(filepath.Join(dir, ownerLockName), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	st := &state{Dir: dir, LockPath: filepath.Join(dir, bedLockName), Keep: opt.Keep}
	if err := os.WriteFile(st.LockPath, nil, 0o666); err != nil {
		releaseOwner()
		os.RemoveAll(dir)
		return nil, err
	}
	b := &Bed{st: st, owned: true, releaseOwner: releaseOwner, logf: logf}
	if opt.Kafka && opt.KafkaBrokers > 1 {
		if _, err := ParseKafkaBrokersN(strconv.Itoa(opt.KafkaBrokers)); err != nil {
			releaseOwner()
			os.RemoveAll(dir)
			return nil, err
		}
		if opt.KafkaSecurity != nil {
			releaseOwner()
			os.RemoveAll(dir)
			return nil, errors.New("testbed: KafkaSecurity is for a single Kafka node, not a cluster (KafkaBrokers > 1)")
		}
	}

	begin := time.Now()
	detached := opt.Keep
	var wg sync.WaitGroup
	var pgErr, kafkaErr error
	if opt.PG {
		wg.Go(func() {
			if st.PG, pgErr = startBedPostgres(ctx, dir, detached, opt, logf); pgErr != nil {
				pgErr = fmt.Errorf("start PostgreSQL: %w", pgErr)
			}
		})
	}
	if opt.Kafka && opt.KafkaBrokers > 1 {
		wg.Go(func() {
			if st.KafkaCluster, kafkaErr = startKafkaCluster(ctx, dir, detached, opt.KafkaBrokers, opt.KafkaHeapMB, logf); kafkaErr != nil {
				kafkaErr = fmt.Errorf("start Kafka cluster: %w", kafkaErr)
			}
		})
	} else if opt.Kafka {
		wg.Go(func() {
			if st.Kafka, kafkaErr = startKafka(ctx, dir, detached, opt.KafkaSecurity, opt.KafkaHeapMB, logf); kafkaErr != nil {
				kafkaErr = fmt.Errorf("start Kafka: %w", kafkaErr)
			}
		})
	}
	wg.Wait()
	b.adopt(st)
	if err := errors.Join(pgErr, kafkaErr, st.write()); err != nil {
		return nil, errors.Join(err, b.Stop())
	}
	logf("testbed: %s; started in %.1fs (bed %s)", b.describe(), time.Since(begin).Seconds(), dir)
	return b, nil
}

// Open takes over the bed in dir, typically one left running by `testbed
// -keep`, so that Stop stops its servers and removes it.
func Open(dir string) (*Bed, error) {
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	release, err := proc.LockFile(filepath.Join(dir, ownerLockName), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		return nil, fmt.Errorf("bed %s is in use by the process that started it: %w", dir, err)
	}
	b := &Bed{owned: true, releaseOwner: release, logf: stderrf}
	b.adopt(st)
	return b, nil
}

// openShared uses the bed in dir without owning it (a test binary under the
// testbed command).
func openShared(dir string) (*Bed, error) {
	st, err := readState(dir)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", EnvBedDir, dir, err)
	}
	b := &Bed{logf: stderrf}
	b.adopt(st)
	return b, nil
}

func (b *Bed) adopt(st *state) {
	b.st = st
	if b.pg = st.PG; b.pg != nil {
		b.pgURL, b.pgVersion = st.PG.URL, st.PG.Version
	}
	if b.kafka = st.Kafka; b.kafka != nil {
		b.brokers, b.kafkaVersion = st.Kafka.Brokers, st.Kafka.Version
	}
	if b.cluster = st.KafkaCluster; b.cluster != nil {
		b.brokers, b.kafkaVersion = b.cluster.bootstrap(), b.cluster.Version
	}
}

// detached reports whether servers this process (re)starts must outlive it.
func (b *Bed) detached() bool { return !b.owned || b.st.Keep }

// Stop stops the servers the bed manages and removes its directory. It does
// nothing in a process that did not start (or Open) the bed.
func (b *Bed) Stop() error {
	if !b.owned || b.st == nil {
		return nil
	}
	var wg sync.WaitGroup
	var pgErr, kafkaErr error
	if b.kafka != nil {
		wg.Go(func() { kafkaErr = b.kafka.stop() })
	}
	if b.cluster != nil {
		wg.Go(func() { kafkaErr = b.cluster.stop() })
	}
	if b.pg != nil {
		wg.Go(func() { pgErr = b.pg.stop() })
	}
	wg.Wait()
	err := errors.Join(pgErr, kafkaErr)
	if err == nil {
		err = removeBedDir(b.st.Dir)
	}
	b.releaseOwner()
	b.owned = false
	return err
}

// Environ returns the variables that point a test process at this bed.
func (b *Bed) Environ() []string {
	var env []string
	if b.pgURL != "" {
		env = append(env, EnvPGURL+"="+b.pgURL)
	}
	if len(b.brokers) > 0 {
		env = append(env, EnvKafkaBrokers+"="+strings.Join(b.brokers, ","))
	}
	if b.st != nil {
		env = append(env, EnvBedDir+"="+b.st.Dir)
	}
	return env
}

// Dir returns the bed's directory (state.json, server data and logs), or ""
// when both services are external.
func (b *Bed) Dir() string {
	if b.st == nil {
		return ""
	}
	return b.st.Dir
}

// LockPath returns the file Main locks shared and Disrupt exclusive, or ""
// when both services are external.
func (b *Bed) LockPath() string {
	if b.st == nil {
		return ""
	}
	return b.st.LockPath
}

// PGURL returns a superuser DSN for the database postgres.
func (b *Bed) PGURL() string { return b.pgURL }

// PGSocketDir returns the directory of the bed's PostgreSQL Unix socket
// (the server's unix_socket_directories); "" when the bed does not manage
// its PostgreSQL.
func (b *Bed) PGSocketDir() string {
	if b.pg == nil {
		return ""
	}
	return b.pg.SocketDir
}

// Brokers returns the Kafka bootstrap brokers.
func (b *Bed) Brokers() []string { return append([]string(nil), b.brokers...) }

// SecureBrokers returns the bootstrap brokers of Kafka's SASL_SSL listener,
// or nil when the bed was started without KafkaSecurity.
func (b *Bed) SecureBrokers() []string {
	if b.kafka == nil {
		return nil
	}
	return append([]string(nil), b.kafka.SecureBrokers...)
}

// PGVersion returns the server's version as it reports it, e.g. "15.18".
func (b *Bed) PGVersion() string { return b.pgVersion }

// KafkaVersion returns the broker's version, e.g. "4.4.0" (for an external
// broker, franz-go's guess from its API versions, e.g. "v4.0").
func (b *Bed) KafkaVersion() string { return b.kafkaVersion }

// PGLogPath returns the PostgreSQL server log, or "" when it is external.
func (b *Bed) PGLogPath() string {
	if b.pg == nil {
		return ""
	}
	return b.pg.LogPath
}

// KafkaLogPath returns the broker's log, or "" when it is external.
func (b *Bed) KafkaLogPath() string {
	if b.kafka == nil {
		return ""
	}
	return b.kafka.LogPath
}

func (b *Bed) describe() string {
	var parts []string
	if b.pgURL != "" {
		kind := "managed"
		if b.pg == nil {
			kind = "external, " + EnvPGURL
		}
		parts = append(parts, fmt.Sprintf("PostgreSQL %s at %s (%s)", b.pgVersion, redactDSN(b.pgURL), kind))
	}
	if len(b.brokers) > 0 {
		kind := "managed"
		switch {
		case b.cluster != nil:
			kind = fmt.Sprintf("managed, %d brokers and %d controllers", len(b.cluster.brokers()), clusterControllers)
		case b.kafka == nil:
			kind = "external, " + EnvKafkaBrokers
		}
		parts = append(parts, fmt.Sprintf("Kafka %s at %s (%s)", b.kafkaVersion, strings.Join(b.brokers, ","), kind))
	}
	return strings.Join(parts, "; ")
}

// reapStale removes beds whose owner died without stopping them (a test
// binary killed by -timeout, say): their servers, which got a parent-death
// signal, are already gone or are stopped here.
func reapStale(logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), bedDirPattern))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		// N.B. the lock file is not created here: a bed whose owner is
		// removing it has none for a moment, and one created then would
		// make the owner's RemoveAll fail ("directory not empty").
		release, err := proc.LockExistingFile(filepath.Join(dir, ownerLockName), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, fs.ErrNotExist) {
			if time.Since(fi.ModTime()) > 10*time.Minute {
				logf("testbed: removing stale bed %s (no owner lock)", dir)
				os.RemoveAll(dir)
			}
			continue // being created or removed right now
		}
		if err != nil {
			continue // its owner is alive
		}
		st, err := readState(dir)
		switch {
		case err != nil && time.Since(fi.ModTime()) < 10*time.Minute:
			release() // perhaps being created right now
			continue
		case err == nil && st.Keep:
			release()
			continue
		case err == nil:
			if st.Kafka != nil {
				_ = st.Kafka.stop()
			}
			if st.KafkaCluster != nil {
				_ = st.KafkaCluster.stop()
			}
			if st.PG != nil {
				_ = st.PG.stop()
			}
		}
		logf("testbed: removing stale bed %s", dir)
		os.RemoveAll(dir)
		release()
	}
}

// removeBedDir removes a stopped bed's directory; a failure names what is
// left in it (something still writing there).
func removeBedDir(dir string) error {
	err := os.RemoveAll(dir)
	if err != nil {
		left, _ := filepath.Glob(filepath.Join(dir, "*"))
		err = fmt.Errorf("remove bed directory (left: %v): %w", left, err)
	}
	return err
}
