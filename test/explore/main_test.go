package explore

import (
	"fmt"
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// relayBin is the walrelay binary built once for the package.
var relayBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-explore-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "explore:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if relayBin, err = harness.BuildRelay(dir); err != nil {
		fmt.Fprintln(os.Stderr, "explore:", err)
		return 1
	}
	// N.B. cases stop Kafka and restart PostgreSQL.
	return testbed.MainDisruptive(m)
}
