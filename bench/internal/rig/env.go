package rig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/test/testbed"
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
// WALRELAY_TEST_BED_DIR (set by `go run ./test/cmd/testbed -- CMD`) and
// the bed's state (testbed.ServersFromEnv).
func FromEnv() (*Env, error) {
	s := testbed.ServersFromEnv()
	e := &Env{PGURL: s.PGURL, Brokers: s.Brokers, BedDir: s.BedDir,
		KafkaPID: s.KafkaPID, PGPID: s.PGPID, PGBinDir: s.PGBinDir, PGVersion: s.PGVersion, KafkaVerion: s.KafkaVersion}
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
