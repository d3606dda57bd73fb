package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	dir, err := os.MkdirTemp("", "walrelay-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	relayBin = filepath.Join(dir, "walrelay")
	build := exec.Command("go", "build", "-o", relayBin, "github.com/walrelay/walrelay/cmd/walrelay")
	build.Env = harness.ShippedBuildEnv()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build walrelay:", err)
		return 1
	}
	return testbed.MainDisruptive(m)
}
