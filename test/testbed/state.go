package testbed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/walrelay/walrelay/test/proc"
)

// Environment variables shared by the testbed command, Main and the tests.
const (
	// EnvPGURL is a superuser DSN of a PostgreSQL server with wal_level=logical.
	EnvPGURL = "WALRELAY_TEST_PG_URL"
	// EnvKafkaBrokers is a comma-separated list of Kafka bootstrap brokers.
	EnvKafkaBrokers = "WALRELAY_TEST_KAFKA_BROKERS"
	// EnvBedDir is the directory of a bed started by another process; its
	// state.json says how to stop, start and restart the servers.
	EnvBedDir = "WALRELAY_TEST_BED_DIR"
	// EnvKafkaStockJVM, when set, runs the broker with the JVM options of
	// Kafka's own start scripts (1 GiB heap, full JIT) instead of the
	// quick-starting ones the tests use; the benchmarks set it.
	EnvKafkaStockJVM = "WALRELAY_TEST_KAFKA_STOCK_JVM"
)

// runManaged says how to run a test that stops or restarts a server on a bed
// whose servers the test bed manages; the tests that cannot inject their
// fault fail with it instead of skipping.
const runManaged = "run it on a managed bed: unset " + EnvPGURL + " and " + EnvKafkaBrokers +
	" (the package starts its own servers), or run it under the testbed command, as make test does: " +
	"go run ./test/cmd/testbed -- go test ./..."

const (
	stateFileName = "state.json"
	// bedLockName is the file Main locks shared and Disrupt exclusive.
	bedLockName = "lock"
	// ownerLockName is held exclusive by the process that created the bed for
	// as long as it lives; a bed whose owner lock is free is stale.
	ownerLockName = "owner.lock"
	bedDirPattern = "walrelay-bed-*"
)

// state is state.json: what a process needs to stop, start and restart the
// servers of a bed it did not start itself.
type state struct {
	Dir      string `json:"dir"`
	LockPath string `json:"lock_path"`
	// Keep marks a bed left running by `testbed -keep`: never reaped as stale.
	Keep  bool        `json:"keep"`
	PG    *pgState    `json:"postgres,omitempty"`
	Kafka *kafkaState `json:"kafka,omitempty"`
	// KafkaCluster is set instead of Kafka for a cluster (Options.KafkaBrokers).
	KafkaCluster *kafkaCluster `json:"kafka_cluster,omitempty"`
}

// pgState describes a PostgreSQL server of the bed.
type pgState struct {
	BinDir    string `json:"bin_dir"`
	DataDir   string `json:"data_dir"`
	SocketDir string `json:"socket_dir"`
	LogPath   string `json:"log_path"`
	Port      int    `json:"port"`
	URL       string `json:"url"`
	// OSUser runs initdb, postgres and pg_ctl; empty means the current user.
	OSUser string `json:"os_user,omitempty"`
	// Args are the arguments of the postgres binary.
	Args    []string `json:"args"`
	Version string   `json:"version"`
}

// kafkaState describes a Kafka node of the bed: the single one (KRaft,
// broker and controller) or one of a cluster.
type kafkaState struct {
	// NodeID and Roles ("broker" or "controller") are set for a node of a
	// cluster.
	NodeID int    `json:"node_id,omitempty"`
	Roles  string `json:"roles,omitempty"`
	Java   string `json:"java"`
	// Args are the arguments of java: JVM options, classpath, kafka.Kafka, config.
	Args           []string `json:"args"`
	Dir            string   `json:"dir"`
	LibDir         string   `json:"lib_dir"`
	ConfigPath     string   `json:"config_path"`
	Log4jConfig    string   `json:"log4j_config"`
	PIDFile        string   `json:"pid_file"`
	LogPath        string   `json:"log_path"`
	StdoutPath     string   `json:"stdout_path"`
	Port           int      `json:"port"`
	ControllerPort int      `json:"controller_port"`
	Brokers        []string `json:"brokers"`
	// SASLPort and SecureBrokers are the SASL_SSL listener's (KafkaSecurity).
	SASLPort      int      `json:"sasl_port,omitempty"`
	SecureBrokers []string `json:"secure_brokers,omitempty"`
	ClusterID     string   `json:"cluster_id"`
	Version       string   `json:"version"`
}

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil {
		return nil, fmt.Errorf("read bed state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, stateFileName), err)
	}
	return &st, nil
}

func (st *state) write() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return proc.WriteFileAtomic(filepath.Join(st.Dir, stateFileName), append(b, '\n'), 0o644)
}
