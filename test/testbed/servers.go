package testbed

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/walrelay/walrelay/test/proc"
)

// Servers is what a command run under the bed (go run ./test/cmd/testbed
// -- CMD) knows of its servers without a *testing.T: the environment the
// testbed command sets (EnvPGURL, EnvKafkaBrokers, EnvBedDir) and, on a
// managed bed, what its state says of the servers. The benchmarks read it.
type Servers struct {
	PGURL   string   // superuser DSN (database postgres)
	Brokers []string // Kafka bootstrap brokers
	BedDir  string   // the bed's directory, "" for external servers

	// From the bed's state, when there is one (zero otherwise; a Kafka
	// cluster's nodes are not described).
	PGBinDir     string // where pg_recvlogical is, "" for PATH
	PGVersion    string
	PGPID        int // the postmaster's pid, 0 when unknown
	KafkaPID     int // the broker's pid, 0 when unknown
	KafkaVersion string
}

// ServersFromEnv reads Servers; PGURL or Brokers is empty when the
// variable is not set.
func ServersFromEnv() *Servers {
	s := &Servers{PGURL: os.Getenv(EnvPGURL), BedDir: os.Getenv(EnvBedDir)}
	for _, b := range strings.Split(os.Getenv(EnvKafkaBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			s.Brokers = append(s.Brokers, b)
		}
	}
	if s.BedDir == "" {
		return s
	}
	st, err := readState(s.BedDir)
	if err != nil {
		return s
	}
	if st.PG != nil {
		s.PGBinDir = st.PG.BinDir
		s.PGVersion = st.PG.Version
		s.PGPID = proc.ReadPIDFile(filepath.Join(st.PG.DataDir, "postmaster.pid"))
	}
	if st.Kafka != nil {
		s.KafkaPID = proc.ReadPIDFile(st.Kafka.PIDFile)
		s.KafkaVersion = st.Kafka.Version
	}
	return s
}
