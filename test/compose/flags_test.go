package compose

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// flagInfo is one flag as `walrelay <command> -h` prints it.
type flagInfo struct {
	usage string
	def   string // "" when the default is the zero value
}

var defaultRE = regexp.MustCompile(`\(default (.*)\)$`)

// parseHelp reads the flag package's PrintDefaults output: a line "  -name
// type" per flag, then its usage on lines indented by four spaces and a tab,
// ending in "(default x)" unless the default is the zero value.
func parseHelp(out string) map[string]flagInfo {
	flags := map[string]flagInfo{}
	var name string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			head, usage, _ := strings.Cut(strings.TrimPrefix(line, "  -"), "\t")
			name = strings.Fields(head)[0]
			flags[name] = flagInfo{usage: strings.TrimSpace(usage)}
		case name != "" && strings.HasPrefix(line, "    \t"):
			fi := flags[name]
			fi.usage = strings.TrimSpace(fi.usage + " " + strings.TrimSpace(line))
			flags[name] = fi
		default:
			name = ""
		}
	}
	for n, fi := range flags {
		if m := defaultRE.FindStringSubmatch(fi.usage); m != nil {
			fi.def = m[1]
			if s, err := strconv.Unquote(m[1]); err == nil {
				fi.def = s
			}
			flags[n] = fi
		}
	}
	return flags
}

// helpFlags runs `walrelay <command> -h` and returns its flags; it fails the
// test when the command does not exist or prints no flags.
func helpFlags(t testing.TB, command string) map[string]flagInfo {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(binary(t), command, "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	// N.B. the exit code of -h is not checked: a flag set with
	// ContinueOnError returns 2 for it, like for a bad flag.
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("walrelay %s -h: %v", command, err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("walrelay %s -h did not exit within 30s", command)
	}
	flags := parseHelp(out.String())
	if len(flags) == 0 || strings.Contains(out.String(), "unknown command") {
		t.Fatalf("walrelay %s -h printed no flags (is %q a sub-command of walrelay?):\n%s", command, command, out.String())
	}
	return flags
}

var runFlagsCache struct {
	sync.Mutex
	flags map[string]flagInfo
}

// runFlags returns the flags of `walrelay run`.
func runFlags(t testing.TB) map[string]flagInfo {
	t.Helper()
	runFlagsCache.Lock()
	defer runFlagsCache.Unlock()
	if runFlagsCache.flags == nil {
		runFlagsCache.flags = helpFlags(t, "run")
	}
	return runFlagsCache.flags
}

const envPrefix = "WALRELAY_"

// flagOfEnv is the flag an environment variable sets: WALRELAY_PG_URL is
// --pg-url.
func flagOfEnv(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, envPrefix)), "_", "-")
}

// checkEnvFlags fails the test for every WALRELAY_* variable in env that
// names no flag of `walrelay run`.
func checkEnvFlags(t *testing.T, where string, env map[string]string) {
	t.Helper()
	flags := runFlags(t)
	n := 0
	for name := range env {
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		n++
		if _, ok := flags[flagOfEnv(name)]; !ok {
			t.Errorf("%s sets %s, but `walrelay run` has no flag --%s", where, name, flagOfEnv(name))
		}
	}
	if n == 0 {
		t.Errorf("%s sets no WALRELAY_* variable", where)
	}
}

// setting is the value flag takes with env: the variable's value or the
// flag's default.
func setting(t testing.TB, env map[string]string, flag string) string {
	t.Helper()
	if v, ok := env[envPrefix+strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))]; ok {
		return v
	}
	fi, ok := runFlags(t)[flag]
	if !ok {
		t.Fatalf("`walrelay run` has no flag --%s", flag)
	}
	return fi.def
}

func TestParseHelp(t *testing.T) {
	out := "Usage: walrelay run [flags]\n\nFlags:\n" +
		"  -create\n    \tcreate the slot (default true)\n" +
		"  -http-addr string\n    \tlisten address (default \":8080\")\n" +
		"  -pg-url string\n    \tPostgreSQL connection string\n" +
		"  -v\tverbose\n"
	got := parseHelp(out)
	want := map[string]flagInfo{
		"create":    {usage: "create the slot (default true)", def: "true"},
		"http-addr": {usage: `listen address (default ":8080")`, def: ":8080"},
		"pg-url":    {usage: "PostgreSQL connection string"},
		"v":         {usage: "verbose"},
	}
	if len(got) != len(want) {
		t.Fatalf("parseHelp = %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("parseHelp[%s] = %+v, want %+v", k, got[k], w)
		}
	}
	if f := flagOfEnv("WALRELAY_TOPIC_REPLICATION_FACTOR"); f != "topic-replication-factor" {
		t.Errorf("flagOfEnv = %q", f)
	}
}
