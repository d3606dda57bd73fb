package inboxkill

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// relayBin and consumerBin are built once for the package.
var relayBin, consumerBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-inboxkill-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "inboxkill:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if relayBin, err = harness.BuildRelay(dir); err != nil {
		fmt.Fprintln(os.Stderr, "inboxkill:", err)
		return 1
	}
	consumerBin = filepath.Join(dir, "inbox-example")
	build := exec.Command("go", "build", "-o", consumerBin, "github.com/walrelay/walrelay/examples/inbox")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "inboxkill: build examples/inbox:", err)
		return 1
	}
	return testbed.Main(m)
}
