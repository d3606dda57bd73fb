package kafkaside

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestVersionStampedLoggedAndExported: a binary built with the version set
// (as make build and the Dockerfile do) reports it on --version, logs it at
// start and exports it as walrelay_build_info.
func TestVersionStampedLoggedAndExported(t *testing.T) {
	t.Parallel()
	const v = "v0.0.0-e2e-stamp"
	bin := filepath.Join(t.TempDir(), "walrelay")
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+v, "-o", bin, "github.com/walrelay/walrelay/cmd/walrelay")
	build.Env = harness.ShippedBuildEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil || string(out) != "walrelay "+v+"\n" {
		t.Errorf("walrelay --version: %v, %q", err, out)
	}
	e := newEnv(t)
	relay := &relayProc{Relay: harness.StartProcess(t, bin, nil, e.RunArgs([]string{"--pg-url", e.DSN}, e.Bed.Brokers())), T: t, Env: e}
	relay.WaitStreaming()
	if !strings.Contains(relay.Log(), `"msg":"starting","version":"`+v+`","go":"`+runtime.Version()+`"`) {
		t.Errorf("walrelay did not log its version at start")
	}
	_, metrics := relay.Get("/metrics")
	if want := `walrelay_build_info{goversion="` + runtime.Version() + `",version="` + v + `"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
