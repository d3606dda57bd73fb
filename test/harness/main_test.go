package harness

import (
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/testbed"
)

// TestMain gives the tests that need servers (the witness's) the test
// bed's; the others do not start it.
func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }
