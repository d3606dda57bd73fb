package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/test/proc"
)

// A Kafka cluster of the bed (Options.KafkaBrokers >= 3): that many brokers
// (node ids 1..n) and a quorum of three dedicated KRaft controllers (node ids
// 101..103), each its own JVM on ports of its own, from the same jars as the
// single node. Dedicated controllers, so that the cluster survives both
// kill -9 of the active controller (two voters remain and elect a new
// leader) and two brokers down at once (the quorum does not lose a voter):
// with combined broker+controller nodes the second would leave one voter of
// three and no controller.
const (
	// EnvKafkaBrokersN is the number of brokers a bed starts: 1 (the
	// default, one node that is broker and controller) or 3 and more (a
	// cluster, see Options.KafkaBrokers).
	EnvKafkaBrokersN = "WALRELAY_TEST_KAFKA_BROKERS_N"

	clusterControllers    = 3
	clusterControllerBase = 100 // controller i has node id 100+i
	// ClusterReplicationFactor and ClusterMinISR are the cluster's
	// default.replication.factor and min.insync.replicas.
	ClusterReplicationFactor = 3
	ClusterMinISR            = 2
	clusterBrokerHeapMB      = 512
	clusterControllerHeapMB  = 256
	maxClusterBrokers        = 9
)

// kafkaCluster describes a Kafka cluster of the bed.
type kafkaCluster struct {
	ClusterID string `json:"cluster_id"`
	Version   string `json:"version"`
	// Nodes are the brokers (ids 1..n), then the controllers.
	Nodes []*kafkaState `json:"nodes"`
}

// ParseKafkaBrokersN parses a value of EnvKafkaBrokersN ("" is 1).
func ParseKafkaBrokersN(s string) (int, error) {
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n == 2 || n > maxClusterBrokers {
		return 0, fmt.Errorf("%s=%q: want 1 (one node) or 3 to %d (a cluster with replication factor %d)", EnvKafkaBrokersN, s, maxClusterBrokers, ClusterReplicationFactor)
	}
	return n, nil
}

func (c *kafkaCluster) brokers() []*kafkaState {
	var out []*kafkaState
	for _, n := range c.Nodes {
		if n.Roles == "broker" {
			out = append(out, n)
		}
	}
	return out
}

func (c *kafkaCluster) bootstrap() []string {
	var out []string
	for _, n := range c.brokers() {
		out = append(out, n.Brokers...)
	}
	return out
}

func (c *kafkaCluster) node(id int32) *kafkaState {
	for _, n := range c.Nodes {
		if int32(n.NodeID) == id {
			return n
		}
	}
	return nil
}

// stop stops every node: brokers first (a clean shutdown moves their
// leaderships while a controller can still do it), then the controllers.
func (c *kafkaCluster) stop() error {
	return c.each([]string{"broker", "controller"}, func(n *kafkaState) error { return n.stop() })
}

// start starts every node that is not running, controllers first, and waits
// until each is ready.
func (c *kafkaCluster) start(ctx context.Context, detached bool) error {
	return c.each([]string{"controller", "broker"}, func(n *kafkaState) error {
		if n.running() {
			return nil
		}
		return n.launch(ctx, detached)
	})
}

// each runs fn on the nodes of each role in turn, on the nodes of one role
// at once, and returns every error.
func (c *kafkaCluster) each(roles []string, fn func(*kafkaState) error) error {
	var errs []error
	var mu sync.Mutex
	for _, role := range roles {
		var wg sync.WaitGroup
		for _, n := range c.Nodes {
			if n.Roles != role {
				continue
			}
			wg.Go(func() {
				if err := fn(n); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("node %d: %w", n.NodeID, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	for len(ports) < n {
		p, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// startKafkaCluster formats and starts n brokers and three controllers under
// dir/kafka/node-ID and waits until every broker is registered and the quorum
// has a leader.
func startKafkaCluster(ctx context.Context, dir string, detached bool, n, heapMB int, logf func(string, ...any)) (*kafkaCluster, error) {
	java, libs, version, err := kafkaInstall(ctx, logf)
	if err != nil {
		return nil, err
	}
	if heapMB <= 0 {
		heapMB = clusterBrokerHeapMB
	}
	ports, err := freePorts(n + clusterControllers)
	if err != nil {
		return nil, err
	}
	c := &kafkaCluster{ClusterID: newClusterID(), Version: version}
	var voters []string
	for i := 1; i <= clusterControllers; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", clusterControllerBase+i, ports[n+i-1]))
	}
	for i := 0; i < n+clusterControllers; i++ {
		st := &kafkaState{Java: java, LibDir: libs, ClusterID: c.ClusterID, Version: version}
		if i < n {
			st.NodeID, st.Roles, st.Port = i+1, "broker", ports[i]
			st.Brokers = []string{fmt.Sprintf("127.0.0.1:%d", st.Port)}
		} else {
			st.NodeID, st.Roles, st.ControllerPort = clusterControllerBase+i-n+1, "controller", ports[i]
		}
		st.Dir = filepath.Join(dir, "kafka", fmt.Sprintf("node-%d", st.NodeID))
		c.Nodes = append(c.Nodes, st)
	}
	// N.B. the cluster-wide settings go to the controllers too: in KRaft the
	// controller resolves a topic's replication factor -1 to its own
	// default.replication.factor and decides leader elections (unclean or
	// not, min.insync.replicas for eligible leader replicas).
	common := fmt.Sprintf("controller.quorum.voters=%s\ncontroller.listener.names=CONTROLLER\n", strings.Join(voters, ",")) +
		kafkaDefaults(ClusterReplicationFactor, ClusterMinISR)

	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, st := range c.Nodes {
		var config string
		heap := heapMB
		if st.Roles == "broker" {
			config = fmt.Sprintf(`# Written by walrelay's test bed: broker %[1]d of a cluster of %[2]d.
node.id=%[1]d
process.roles=broker
listeners=PLAINTEXT://127.0.0.1:%[3]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[3]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=%[4]s
`, st.NodeID, n, st.Port, filepath.Join(st.Dir, "data"))
		} else {
			heap = clusterControllerHeapMB
			config = fmt.Sprintf(`# Written by walrelay's test bed: a controller of a cluster of %[2]d brokers.
node.id=%[1]d
process.roles=controller
listeners=CONTROLLER://127.0.0.1:%[3]d
listener.security.protocol.map=CONTROLLER:PLAINTEXT
log.dirs=%[4]s
`, st.NodeID, n, st.ControllerPort, filepath.Join(st.Dir, "data"))
		}
		wg.Go(func() {
			if err := st.prepare(ctx, config+common, heap, nil); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", st.NodeID, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if err := c.start(ctx, detached); err != nil {
		return c, err
	}
	return c, c.waitFormed(ctx)
}

// waitFormed waits until the metadata lists every broker and the quorum
// has a leader.
func (c *kafkaCluster) waitFormed(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaReadyWithin)
	defer cancel()
	want := len(c.brokers())
	var lastErr error
	for {
		ids, err := brokerIDs(ctx, c.bootstrap())
		if err == nil && len(ids) == want {
			if _, err = activeController(ctx, c.bootstrap()); err == nil {
				return nil
			}
		} else if err == nil {
			err = fmt.Errorf("metadata lists brokers %v of %d", ids, want)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka cluster not formed within %s: %v", kafkaReadyWithin, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// controllerReady waits until the controller's listener accepts connections.
func (st *kafkaState) controllerReady(ctx context.Context, p *proc.Proc) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaReadyWithin)
	defer cancel()
	addr := fmt.Sprintf("127.0.0.1:%d", st.ControllerPort)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("kafka controller exited during startup (%v)%s", p.Err(), st.logTails(40))
		case <-ctx.Done():
			return fmt.Errorf("kafka controller %d does not listen on %s within %s%s", st.NodeID, addr, kafkaReadyWithin, st.logTails(40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dumpClusterLogs logs the last lines of every node's log.
func (c *kafkaCluster) logTails(n int) string {
	var b strings.Builder
	for _, st := range c.Nodes {
		fmt.Fprintf(&b, "\n--- %s %d (%s):\n%s", st.Roles, st.NodeID, st.LogPath, proc.Tail(st.LogPath, n))
		if fi, err := os.Stat(st.StdoutPath); err == nil && fi.Size() > 0 {
			fmt.Fprintf(&b, "\n--- %s %d stdout (%s):\n%s", st.Roles, st.NodeID, st.StdoutPath, proc.Tail(st.StdoutPath, n/2))
		}
	}
	return b.String()
}

// brokerIDs returns the ids of the brokers the metadata lists, sorted.
func brokerIDs(ctx context.Context, bootstrap []string) ([]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DialTimeout(2*time.Second), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	brokers, err := kadm.NewClient(cl).ListBrokers(actx)
	if err != nil {
		return nil, err
	}
	ids := brokers.NodeIDs()
	slices.Sort(ids)
	return ids, nil
}

// activeController asks the cluster (a broker forwards DescribeQuorum to the
// controllers) for the leader of the metadata quorum.
func activeController(ctx context.Context, bootstrap []string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DialTimeout(2*time.Second), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(actx, cl)
	if err != nil {
		return -1, fmt.Errorf("describe quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("describe quorum: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, fmt.Errorf("describe quorum: %w", err)
			}
			if p.LeaderID < 0 {
				return -1, errors.New("describe quorum: the metadata quorum has no leader")
			}
			return p.LeaderID, nil
		}
	}
	return -1, errors.New("describe quorum: no partition in the answer")
}
