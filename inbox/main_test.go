package inbox

import (
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }
