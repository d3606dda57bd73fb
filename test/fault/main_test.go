package fault

import (
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
)

// relayBin is the walrelay binary built once for the package.
var relayBin string

func TestMain(m *testing.M) {
	os.Exit(harness.MainDisruptive(m, "fault", &relayBin))
}
