package explore

import (
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
)

// relayBin is the walrelay binary built once for the package.
var relayBin string

// N.B. cases stop Kafka and restart PostgreSQL.
func TestMain(m *testing.M) {
	os.Exit(harness.MainDisruptive(m, "explore", &relayBin))
}
