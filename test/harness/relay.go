package harness

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// EnvRelayBin names a walrelay binary to test instead of building one.
const EnvRelayBin = "WALRELAY_TEST_BIN"

// BuildRelay builds the walrelay binary into dir, or returns the one
// WALRELAY_TEST_BIN names. Call it from TestMain, once per package.
func BuildRelay(dir string) (string, error) {
	if bin := os.Getenv(EnvRelayBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s: %w", EnvRelayBin, err)
		}
		return bin, nil
	}
	bin := filepath.Join(dir, "walrelay")
	build := exec.Command("go", "build", "-o", bin, "github.com/walrelay/walrelay/cmd/walrelay")
	build.Env = ShippedBuildEnv()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build walrelay: %w", err)
	}
	return bin, nil
}

// ShippedBuildEnv is the environment to go build walrelay in as it ships
// (Dockerfile, make build): without cgo, so a static binary with Go's own
// resolver, the one the image runs.
func ShippedBuildEnv() []string { return append(os.Environ(), "CGO_ENABLED=0") }

// MainDisruptive is the TestMain of a package whose tests run the walrelay
// binary and stop or restart the servers: it builds the binary once into
// *bin (or takes the one WALRELAY_TEST_BIN names), then runs
// testbed.MainDisruptive. pkg names the package in error messages.
func MainDisruptive(m *testing.M, pkg string, bin *string) int {
	dir, err := os.MkdirTemp("", "walrelay-"+pkg+"-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, pkg+":", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = BuildRelay(dir); err != nil {
		fmt.Fprintln(os.Stderr, pkg+":", err)
		return 1
	}
	return testbed.MainDisruptive(m)
}

// Relay is one walrelay process.
type Relay struct {
	t   testing.TB
	env *Env
	p   *proc.Proc

	mu       sync.Mutex
	httpAddr string // bound address of --http-addr, once logged
}

// StartRelay runs the walrelay binary against e with args added to (and
// overriding) the defaults: e's database, slot, publication and the bed's
// brokers.
func (e *Env) StartRelay(t testing.TB, args ...string) *Relay {
	t.Helper()
	all := append(append(e.RunArgs([]string{"--pg-url", e.DSN}, e.Bed.Brokers()), e.RelayArgs...), args...)
	p := StartProcess(t, e.Bin, nil, all)
	p.env = e
	return p
}

// RunArgs is `walrelay run` on e's slot and publication with the tests'
// defaults, connecting with pgURL (--pg-url DSN, or --pg-url-file FILE) to
// brokers.
func (e *Env) RunArgs(pgURL, brokers []string) []string {
	all := append([]string{"run"}, pgURL...)
	return append(all,
		"--brokers", strings.Join(brokers, ","),
		"--slot", e.Slot,
		"--publication", e.Pub,
		"--header-columns", "type:eventType",
		"--status-interval", "1s",
		"--topic-partitions", "3",
		"--log-level", "info",
		// N.B. loopback only, on a port of its own: relays run side by side.
		"--http-addr", "127.0.0.1:0",
	)
}

// StartProcess runs bin with args and environ (NAME=value, added to this
// process's environment), its output in a log file: killed when the test
// ends, its log shown when the test failed, its peak memory sampled.
func StartProcess(t testing.TB, bin string, environ, args []string) *Relay {
	t.Helper()
	p, err := proc.Start(proc.Options{
		Name: "walrelay", Path: bin, Args: args,
		Env: append(os.Environ(), environ...),
		Log: filepath.Join(t.TempDir(), fmt.Sprintf("walrelay-%d.log", time.Now().UnixNano())),
		// N.B. a test binary killed by -timeout takes its relays with it
		// (the default death signal, SIGKILL).
		Sample: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{t: t, p: p}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			r.dumpLog()
		}
	})
	return r
}

// Err is how the process ended (nil while it runs or after exit code 0).
func (p *Relay) Err() error { return p.p.Err() }

// LoggedHTTPAddr is the HTTP address if the process has logged it yet.
func (p *Relay) LoggedHTTPAddr() (string, bool) {
	m := httpAddrRE.FindStringSubmatch(p.Log())
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Pid is the process id.
func (p *Relay) Pid() int { return p.p.Pid() }

// PeakRSSMB is the largest resident set seen, in MiB.
func (p *Relay) PeakRSSMB() float64 { return p.p.PeakRSSMB() }

func (p *Relay) dumpLog() {
	p.t.Logf("walrelay log (%s, last 80 lines):\n%s", p.p.LogPath, p.p.Tail(80))
}

// Log returns the whole log so far.
func (p *Relay) Log() string { return p.p.Log() }

// Stop sends SIGTERM and waits for the exit; it returns the exit code.
func (p *Relay) Stop(timeout time.Duration) int {
	p.t.Helper()
	if err := p.p.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	return p.Wait(timeout)
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Relay) Kill() {
	p.t.Helper()
	if err := p.p.Kill(); err != nil {
		p.t.Fatal(err)
	}
}

// Wait waits for the exit and returns the exit code, failing the test after
// timeout.
func (p *Relay) Wait(timeout time.Duration) int {
	p.t.Helper()
	if !p.p.Wait(timeout) {
		_ = p.p.Kill()
		p.t.Fatalf("walrelay did not exit within %s", timeout)
	}
	code, err := p.p.ExitCode()
	if err != nil {
		p.t.Fatalf("walrelay: %v", err)
	}
	return code
}

// Exited reports whether the process has ended.
func (p *Relay) Exited() bool { return p.p.Exited() }

var httpAddrRE = regexp.MustCompile(`"msg":"serving /metrics, /healthz and /readyz","addr":"([^"]+)"`)

// HTTPAddr is the address serving /metrics, /healthz and /readyz, as the
// process logs it once it listens.
func (p *Relay) HTTPAddr() string {
	p.t.Helper()
	p.mu.Lock()
	addr := p.httpAddr
	p.mu.Unlock()
	if addr != "" {
		return addr
	}
	WaitFor(p.t, 30*time.Second, "walrelay to serve HTTP", func() bool {
		m := httpAddrRE.FindStringSubmatch(p.Log())
		if m == nil && p.Exited() {
			p.t.Fatalf("walrelay exited before serving HTTP")
		}
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	p.mu.Lock()
	p.httpAddr = addr
	p.mu.Unlock()
	return addr
}

// Ready GETs /readyz and returns its status code (0 when unreachable).
func (p *Relay) Ready() int {
	p.t.Helper()
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + p.HTTPAddr() + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// WaitStreaming waits until a walrelay streams the slot (a walsender holds
// it); it fails if this process exits first.
func (p *Relay) WaitStreaming() {
	p.t.Helper()
	WaitFor(p.t, time.Minute, "walrelay to stream the slot", func() bool {
		if p.Exited() {
			p.t.Fatalf("walrelay exited before streaming")
		}
		return p.env.Walsender(p.t) != 0
	})
}
