package e2e

import (
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// relayBin is the walrelay binary built once for the package.
var relayBin string

func TestMain(m *testing.M) {
	os.Exit(e2etest.Main(m, &relayBin))
}
