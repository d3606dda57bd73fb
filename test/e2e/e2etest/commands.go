package e2etest

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// RunOnce runs the binary to completion and returns its exit code and
// combined output.
func RunOnce(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return RunFor(t, time.Minute, env, args...)
}

// WithUser is dsn with user and password in place of its own.
func WithUser(t *testing.T, dsn, user, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// RunFor runs the binary like RunOnce but gives up after timeout: a command
// that should have exited and did not is reported with exit code -1.
func RunFor(t *testing.T, timeout time.Duration, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, out.String() + "\n(killed: still running after " + timeout.String() + ")"
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	case err != nil:
		t.Fatalf("run walrelay: %v", err)
	}
	return 0, out.String()
}

// RunCmd runs a walrelay sub-command against e and returns its output and
// exit code.
func RunCmd(t *testing.T, e *Env, cmd string, args ...string) (string, int) {
	t.Helper()
	all := append([]string{cmd, "--pg-url", e.DSN, "--brokers", strings.Join(e.KafkaBrokers(), ","),
		"--slot", e.Slot, "--publication", e.Pub}, args...)
	p := harness.StartProcess(t, Bin, nil, all)
	code := p.Wait(time.Minute)
	return p.Log(), code
}

// Args is `walrelay <cmd>` on e with the tests' defaults.
func (e *Env) Args(cmd string, args ...string) []string {
	all := e.RunArgs([]string{"--pg-url", e.DSN}, e.Bed.Brokers())
	all[0] = cmd
	return append(all, args...)
}

// WriteFile writes data to dir/name (mode 0600) and returns the path.
func WriteFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// CommandArgs are the flags for walrelay cmd (check, status) against e,
// other than Kafka's security.
func (e *Env) CommandArgs(cmd string) []string {
	return []string{cmd, "--pg-url-file", e.PGURLFile, "--brokers", strings.Join(e.KafkaBrokers(), ","),
		"--slot", e.Slot, "--publication", e.Pub, "--header-columns", "type:eventType"}
}
