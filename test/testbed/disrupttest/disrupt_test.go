package disrupttest

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.MainDisruptive(m)) }

func TestStopStartKafka(t *testing.T) {
	testbed.Disrupt(t)
	b := testbed.Get(t)
	// N.B. a topic of its own each run: a kept bed keeps the last run's.
	topic := fmt.Sprintf("disrupt.kafka.%d", time.Now().UnixNano())
	b.CreateTopic(t, topic, 1)
	produce(t, b, topic, "before")

	b.StopKafka(t)
	if c, err := net.DialTimeout("tcp", b.Brokers()[0], time.Second); err == nil {
		c.Close()
		t.Fatalf("broker %s still accepts connections after StopKafka", b.Brokers()[0])
	}
	b.StartKafka(t)

	produce(t, b, topic, "after")
	recs := b.ConsumeAll(t, []string{topic}, 300*time.Millisecond)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if len(got) != 2 || got[0] != "before" || got[1] != "after" {
		t.Fatalf("records after a broker restart = %q, want [before after]", got)
	}
}

// TestKafkaLeftStopped leaves the broker stopped: Disrupt's cleanup must start
// it again for the tests that follow.
func TestKafkaLeftStopped(t *testing.T) {
	testbed.Disrupt(t)
	testbed.Get(t).StopKafka(t)
}

func TestRestartPostgres(t *testing.T) {
	testbed.Disrupt(t)
	b := testbed.Get(t)
	dsn := b.NewDatabase(t)
	b.Exec(t, dsn, "CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')")
	b.Exec(t, dsn, "SELECT pg_create_logical_replication_slot('kept', 'pgoutput')")
	var before time.Time
	if err := b.QueryRow(t, dsn, "SELECT pg_postmaster_start_time()").Scan(&before); err != nil {
		t.Fatal(err)
	}

	b.RestartPostgres(t)

	var after time.Time
	var v string
	if err := b.QueryRow(t, dsn, "SELECT pg_postmaster_start_time(), (SELECT v FROM t)").Scan(&after, &v); err != nil {
		t.Fatalf("query after restart: %v", err)
	}
	if !after.After(before) {
		t.Errorf("postmaster start time %v not after %v: the server was not restarted", after, before)
	}
	if v != "kept" {
		t.Errorf("row after restart = %q, want kept", v)
	}
	if s := b.Slot(t, dsn, "kept"); !s.Exists || s.Plugin != "pgoutput" {
		t.Errorf("slot after restart = %+v, want the pgoutput slot", s)
	}
}

// TestDisruptIsExclusive checks that no other test process could hold the
// bed while a disruptive test runs.
func TestDisruptIsExclusive(t *testing.T) {
	testbed.Disrupt(t)
	b := testbed.Get(t)
	if err := tryLock(t, b.LockPath(), syscall.LOCK_SH); err == nil {
		t.Fatal("took a shared lock on the bed while Disrupt holds it")
	}
}

// TestParallelTestHoldsBed checks that a non-disruptive test of a
// MainDisruptive package keeps other packages' Disrupt out while it runs.
func TestParallelTestHoldsBed(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	if b.LockPath() == "" {
		t.Fatal("testbed: both services are external, so there is no bed lock to check; unset WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS, or run under go run ./test/cmd/testbed -- go test")
	}
	if err := tryLock(t, b.LockPath(), syscall.LOCK_EX); err == nil {
		t.Fatal("took the exclusive lock on the bed while a test holds it")
	}
}

// tryLock tries to flock path on a descriptor of its own, without waiting.
func tryLock(t *testing.T, path string, how int) error {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
}

// TestAfterDisruption runs after the disruptive tests (it is parallel): both
// servers must be up, whatever those tests left behind.
func TestAfterDisruption(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	var one int
	if err := b.QueryRow(t, b.PGURL(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("PostgreSQL after the disruptive tests: %d, %v", one, err)
	}
	topic := fmt.Sprintf("disrupt.after.%d", time.Now().UnixNano())
	b.CreateTopic(t, topic, 1)
	produce(t, b, topic, "up")
}

func produce(t *testing.T, b *testbed.Bed, topic, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce %q: %v", value, err)
	}
}
