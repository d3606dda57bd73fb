package rig

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/walrelay/walrelay/test/proc"
)

// Env is the test bed the command runs against.
type Env struct {
	PGURL   string   // superuser DSN (database postgres)
	Brokers []string // Kafka bootstrap brokers
	BedDir  string   // the bed's directory, "" for external servers

	KafkaPID    int    // the broker's pid, 0 when unknown
	PGPID       int    // the postmaster's pid, 0 when unknown
	PGBinDir    string // where pg_recvlogical is, "" for PATH
	PGVersion   string
	KafkaVerion string
}

// FromEnv reads WALRELAY_TEST_PG_URL, WALRELAY_TEST_KAFKA_BROKERS and
// WALRELAY_TEST_BED_DIR (set by `go run ./test/cmd/testbed -- CMD`).
func FromEnv() (*Env, error) {
	e := &Env{PGURL: os.Getenv("WALRELAY_TEST_PG_URL"), BedDir: os.Getenv("WALRELAY_TEST_BED_DIR")}
	for _, b := range strings.Split(os.Getenv("WALRELAY_TEST_KAFKA_BROKERS"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			e.Brokers = append(e.Brokers, b)
		}
	}
	if e.PGURL == "" || len(e.Brokers) == 0 {
		return nil, errors.New("WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS are not set: run under the test bed, e.g. go run ./test/cmd/testbed -- go run ./bench/cmd/bench")
	}
	for _, b := range e.Brokers {
		if !loopback(b) {
			return nil, fmt.Errorf("broker %s is not a loopback address: the benchmark only talks to servers on this machine", b)
		}
	}
	if h := pgHost(e.PGURL); !loopback(h + ":0") {
		return nil, fmt.Errorf("PostgreSQL host %q is not a loopback address: the benchmark only talks to servers on this machine", h)
	}
	if e.BedDir != "" {
		e.readBedState()
	}
	return e, nil
}

func loopback(hostport string) bool {
	h := hostport
	if i := strings.LastIndex(hostport, ":"); i >= 0 {
		h = hostport[:i]
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.") || strings.HasPrefix(h, "/")
}

// bedState is the part of the test bed's state.json the rig reads.
type bedState struct {
	PG *struct {
		BinDir  string `json:"bin_dir"`
		DataDir string `json:"data_dir"`
		Version string `json:"version"`
	} `json:"postgres"`
	Kafka *struct {
		PIDFile string `json:"pid_file"`
		Version string `json:"version"`
	} `json:"kafka"`
}

func (e *Env) readBedState() {
	b, err := os.ReadFile(filepath.Join(e.BedDir, "state.json"))
	if err != nil {
		return
	}
	var st bedState
	if json.Unmarshal(b, &st) != nil {
		return
	}
	if st.PG != nil {
		e.PGBinDir = st.PG.BinDir
		e.PGVersion = st.PG.Version
		e.PGPID = proc.ReadPIDFile(filepath.Join(st.PG.DataDir, "postmaster.pid"))
	}
	if st.Kafka != nil {
		e.KafkaPID = proc.ReadPIDFile(st.Kafka.PIDFile)
		e.KafkaVerion = st.Kafka.Version
	}
}
