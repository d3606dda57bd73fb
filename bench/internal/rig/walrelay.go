package rig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/walrelay/walrelay/test/proc"
)

// BuildWalrelay builds ./cmd/walrelay (of the module in the current
// directory) into dir with the build tags given and returns the binary's
// path. The tag "bench" adds --bench-null-sink and --cpu-profile
// (cmd/walrelay/bench.go). It builds as the image does (Dockerfile):
// without cgo, a symbol table or DWARF, so that the memory measured is the
// shipped binary's.
func BuildWalrelay(ctx context.Context, dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "walrelay")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/walrelay/walrelay/cmd/walrelay")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build walrelay: %w\n%s", err, out)
	}
	return bin, nil
}

// HasFlag reports whether `bin run -h` lists --name.
func HasFlag(bin, name string) bool {
	out, _ := exec.Command(bin, "run", "-h").CombinedOutput()
	// N.B. PrintDefaults writes "  -name type" for most flags and
	// "  -name" alone for a bool.
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "-"+name && strings.HasPrefix(line, "  -") {
			return true
		}
	}
	return false
}

// FlagDefault is the default of walrelay run's flag --name as bin's help
// prints it (the "(default X)" at the end of the flag's description), so
// that the benchmark reports the binary's own default, not a copy of it.
func FlagDefault(bin, name string) (string, error) {
	out, err := exec.Command(bin, "run", "-h").CombinedOutput()
	if len(out) == 0 && err != nil {
		return "", fmt.Errorf("run %s run -h: %w", bin, err)
	}
	lines := strings.Split(string(out), "\n")
	for i, line := range lines {
		if f := strings.Fields(line); len(f) == 0 || f[0] != "-"+name || !strings.HasPrefix(line, "  -") {
			continue
		}
		// N.B. PrintDefaults indents the description with a tab, on
		// the lines after the name, and ends it with "(default X)".
		for _, d := range lines[i+1:] {
			if !strings.HasPrefix(d, "    \t") {
				break
			}
			if k := strings.LastIndex(d, "(default "); k >= 0 && strings.HasSuffix(d, ")") {
				return strings.Trim(d[k+len("(default "):len(d)-1], `"`), nil
			}
		}
		return "", fmt.Errorf("%s run -h: --%s has no default", bin, name)
	}
	return "", fmt.Errorf("%s run -h: no flag --%s", bin, name)
}

// StartWalrelay runs `bin run args...` with its log in logPath. The
// environment has no WALRELAY_* variables but those of the test bed, so that
// flags alone configure it.
func StartWalrelay(bin, logPath string, args ...string) (*proc.Proc, error) {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WALRELAY_") && !strings.HasPrefix(kv, "WALRELAY_TEST_") {
			continue
		}
		env = append(env, kv)
	}
	return StartProc("walrelay", logPath, env, append([]string{bin, "run"}, args...)...)
}

// StartProc starts args (args[0] the executable) with stdout and stderr
// appended to logPath and env as its whole environment (nil: this
// process's), its peak RSS and CPU time sampled. It has its own process
// group, so a terminal's ^C reaches only the bench, which stops its children
// in order, and it dies with the bench.
func StartProc(name, logPath string, env []string, args ...string) (*proc.Proc, error) {
	return proc.Start(proc.Options{Name: name, Path: args[0], Args: args[1:], Env: env, Log: logPath, Group: true, Sample: true})
}
