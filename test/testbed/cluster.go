package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/walrelay/walrelay/test/proc"
)

// The package's own cluster bed (GetCluster), when the package's bed is not
// a cluster.
var pkgCluster struct {
	once sync.Once
	bed  *Bed
	err  error
}

// GetCluster returns a bed whose Kafka is a cluster the bed manages (at least
// three brokers and three controllers; see Options.KafkaBrokers) for a test
// that stops, kills or cuts off its nodes. When the package's bed is such a
// cluster (the testbed command under WALRELAY_TEST_KAFKA_BROKERS_N=3, `make
// cluster`) it is that bed and GetCluster calls Disrupt (so the test must not
// call t.Parallel); otherwise it is a PostgreSQL and a three-broker cluster
// started for the package on first use and stopped when its tests end, which
// no other package uses. The package's TestMain must call MainDisruptive.
func GetCluster(t testing.TB) *Bed {
	t.Helper()
	if !pkgBed.mainCalled || !pkgBed.disruptive {
		t.Fatal("testbed.GetCluster: only allowed in a package whose TestMain calls testbed.MainDisruptive")
	}
	if dir := os.Getenv(EnvBedDir); dir != "" || os.Getenv(EnvKafkaBrokersN) != "" {
		if b := getBed(t); b.cluster != nil {
			Disrupt(t)
			return b
		}
	}
	if os.Getenv(EnvKafkaBrokers) != "" && os.Getenv(EnvBedDir) == "" {
		t.Fatalf("testbed.GetCluster: %s names an external Kafka, whose nodes the bed cannot stop; unset it (a cluster is then started) or run under the testbed command with %s=3", EnvKafkaBrokers, EnvKafkaBrokersN)
	}
	pkgCluster.once.Do(func() {
		logf := stderrf
		pkgCluster.bed, pkgCluster.err = Start(context.Background(), Options{PG: true, Kafka: true, KafkaBrokers: ClusterReplicationFactor, Logf: logf})
		if pkgCluster.bed != nil {
			pkgCluster.bed.private = true
		}
	})
	if pkgCluster.err != nil {
		t.Fatalf("testbed: start a Kafka cluster for the package: %v", pkgCluster.err)
	}
	b := pkgCluster.bed
	if _, loaded := pkgBed.dumpOnFailure.LoadOrStore(t, struct{}{}); !loaded {
		t.Cleanup(func() {
			pkgBed.dumpOnFailure.Delete(t)
			if t.Failed() {
				b.dumpLogs(t)
			}
		})
	}
	// N.B. a test leaves the cluster whole for the next one.
	t.Cleanup(func() {
		if err := b.cluster.start(context.Background(), b.detached()); err != nil {
			t.Errorf("testbed: restart the Kafka nodes the test left stopped: %v", err)
		}
	})
	return b
}

// stopPackageCluster stops the package's own cluster bed, if it started one.
func stopPackageCluster() error {
	if pkgCluster.bed == nil {
		return nil
	}
	return pkgCluster.bed.Stop()
}

// KafkaNode is one process of a Kafka cluster the bed manages.
type KafkaNode struct {
	ID         int32
	Controller bool   // a KRaft controller; otherwise a broker
	Addr       string // host:port of its listener (PLAINTEXT or CONTROLLER)
}

// KafkaNodes returns the cluster's nodes, brokers first; nil when Kafka is a
// single node or external.
func (b *Bed) KafkaNodes() []KafkaNode {
	if b.cluster == nil {
		return nil
	}
	var out []KafkaNode
	for _, n := range b.cluster.Nodes {
		kn := KafkaNode{ID: int32(n.NodeID), Controller: n.Roles == "controller"}
		if kn.Controller {
			kn.Addr = fmt.Sprintf("127.0.0.1:%d", n.ControllerPort)
		} else {
			kn.Addr = n.Brokers[0]
		}
		out = append(out, kn)
	}
	return out
}

// BrokerIDs returns the node ids of the cluster's brokers.
func (b *Bed) BrokerIDs() []int32 {
	var ids []int32
	for _, n := range b.KafkaNodes() {
		if !n.Controller {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// BrokerAddr returns the host:port broker id advertises.
func (b *Bed) BrokerAddr(t testing.TB, id int32) string {
	t.Helper()
	n := b.clusterNode(t, id, "BrokerAddr")
	if n.Roles != "broker" {
		t.Fatalf("testbed: node %d is a controller, not a broker", id)
	}
	return n.Brokers[0]
}

func (b *Bed) clusterNode(t testing.TB, id int32, what string) *kafkaState {
	t.Helper()
	if b.cluster == nil {
		t.Fatalf("testbed: %s needs a Kafka cluster the bed manages (testbed.GetCluster, or %s=3)", what, EnvKafkaBrokersN)
	}
	n := b.cluster.node(id)
	if n == nil {
		t.Fatalf("testbed: %s: the cluster has no node %d (nodes %v)", what, id, b.KafkaNodes())
	}
	return n
}

// requireNodeFault fails the test unless it may stop nodes of b.
func (b *Bed) requireNodeFault(t testing.TB, what string) {
	t.Helper()
	if !b.private {
		b.requireDisrupt(t, what)
	}
}

// StopKafkaNode stops node id cleanly (SIGTERM, SIGKILL after 20 s) and
// waits until it has exited. A broker's clean shutdown hands its
// leaderships to the other replicas first.
func (b *Bed) StopKafkaNode(t testing.TB, id int32) {
	t.Helper()
	n := b.clusterNode(t, id, "StopKafkaNode")
	b.requireNodeFault(t, "StopKafkaNode")
	begin := time.Now()
	if err := n.stop(); err != nil {
		t.Fatalf("testbed: node %d: %v", id, err)
	}
	t.Logf("testbed: stopped Kafka %s %d in %.1fs", n.Roles, id, time.Since(begin).Seconds())
}

// KillKafkaNode kills node id with SIGKILL and waits until it is gone.
func (b *Bed) KillKafkaNode(t testing.TB, id int32) {
	t.Helper()
	n := b.clusterNode(t, id, "KillKafkaNode")
	b.requireNodeFault(t, "KillKafkaNode")
	if err := proc.KillPID(n.pid(), n.ConfigPath); err != nil {
		t.Fatalf("testbed: kill Kafka node %d: %v", id, err)
	}
}

// StartKafkaNode starts node id again with its storage and waits until it
// is ready: a broker lists itself in its metadata (caught up and unfenced),
// a controller listens.
func (b *Bed) StartKafkaNode(t testing.TB, id int32) {
	t.Helper()
	n := b.clusterNode(t, id, "StartKafkaNode")
	b.requireNodeFault(t, "StartKafkaNode")
	if n.running() {
		t.Fatalf("testbed: start Kafka node %d: it is running (pid file %s)", id, n.PIDFile)
	}
	begin := time.Now()
	if err := n.launch(context.Background(), b.detached()); err != nil {
		t.Fatalf("testbed: start Kafka node %d: %v", id, err)
	}
	t.Logf("testbed: started Kafka %s %d in %.1fs", n.Roles, id, time.Since(begin).Seconds())
}

// KafkaNodeRunning reports whether node id's process is alive.
func (b *Bed) KafkaNodeRunning(t testing.TB, id int32) bool {
	t.Helper()
	return b.clusterNode(t, id, "KafkaNodeRunning").running()
}

// ActiveController returns the node id of the metadata quorum's leader (the
// active controller), as DescribeQuorum reports it, waiting up to a minute
// for the quorum to have one.
func (b *Bed) ActiveController(t testing.TB) int32 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		id, err := activeController(context.Background(), b.brokers)
		if err == nil {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("testbed: active controller: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PartitionState is a partition as the cluster's metadata describes it.
type PartitionState struct {
	Topic       string
	Partition   int32
	Leader      int32 // -1: none
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// Partitions describes every partition of topics from the metadata; a
// topic that does not exist fails the test.
func (b *Bed) Partitions(t testing.TB, topics ...string) []PartitionState {
	t.Helper()
	adm, closeAdm := b.admin(t)
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		t.Fatalf("testbed: metadata of %v: %v", topics, err)
	}
	var out []PartitionState
	for _, topic := range topics {
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil {
			t.Fatalf("testbed: topic %s: %v", topic, td.Err)
		}
		for _, p := range td.Partitions.Sorted() {
			ps := PartitionState{Topic: topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: slices.Sorted(slices.Values(p.Replicas)), ISR: slices.Sorted(slices.Values(p.ISR))}
			if p.Err != nil && !errors.Is(p.Err, kerr.LeaderNotAvailable) {
				t.Fatalf("testbed: partition %s/%d: %v", topic, p.Partition, p.Err)
			}
			out = append(out, ps)
		}
	}
	return out
}

// WaitInSync waits until every partition of topics has a leader and all its
// replicas in sync (on a broker restart: it has caught up), failing the test
// after timeout.
func (b *Bed) WaitInSync(t testing.TB, timeout time.Duration, topics ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var behind []string
		for _, p := range b.Partitions(t, topics...) {
			if p.Leader < 0 || !slices.Equal(p.ISR, p.Replicas) {
				behind = append(behind, fmt.Sprintf("%s/%d leader %d isr %v of %v", p.Topic, p.Partition, p.Leader, p.ISR, p.Replicas))
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testbed: partitions not in sync after %s: %s", timeout, strings.Join(behind, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// EndOffsets returns the end offset of every partition of topics; a topic
// that does not exist is absent.
func (b *Bed) EndOffsets(t testing.TB, topics ...string) map[string]map[int32]int64 {
	t.Helper()
	cl := b.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	ends, err := ListEndOffsets(ctx, cl, false, topics...)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return ends
}

// DeleteTopics deletes topics (those that exist), e.g. at a test's end so
// that a cluster's brokers have less to load when a later test restarts
// them. It does not wait for the deletion (a stopped broker may hold it up).
func (b *Bed) DeleteTopics(t testing.TB, topics ...string) {
	t.Helper()
	adm, closeAdm := b.admin(t)
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	if err := deleteTopics(ctx, adm, topics); err != nil {
		t.Errorf("testbed: %v", err)
	}
}
