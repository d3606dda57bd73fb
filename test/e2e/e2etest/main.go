package e2etest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// Bin is the walrelay binary Main built for the package.
var Bin string

// Main is an end-to-end package's TestMain: it builds walrelay once for
// the package (its path in Bin and in *bin) and runs the tests on the
// test bed (testbed.MainDisruptive). It returns the exit code.
func Main(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "walrelay-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	Bin = filepath.Join(dir, "walrelay")
	*bin = Bin
	build := exec.Command("go", "build", "-o", Bin, "github.com/walrelay/walrelay/cmd/walrelay")
	build.Env = harness.ShippedBuildEnv()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build walrelay:", err)
		return 1
	}
	return testbed.MainDisruptive(m)
}
