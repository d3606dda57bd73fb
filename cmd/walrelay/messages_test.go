package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// run is realMain with the outputs as strings.
func run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = realMain(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestParseErrorsNameTheFormat: a value that does not parse, from a flag or
// its environment variable, exits 2 with the format wanted and an example.
func TestParseErrorsNameTheFormat(t *testing.T) {
	cases := []struct {
		name string
		env  [2]string
		args []string
		want string
	}{
		{"duration without a unit in the environment", [2]string{"WALRELAY_SHUTDOWN_TIMEOUT", "30"}, nil, `WALRELAY_SHUTDOWN_TIMEOUT="30": want a duration with a unit, e.g. 30s`},
		{"PostgreSQL's minute", [2]string{"WALRELAY_SHUTDOWN_TIMEOUT", "2min"}, nil, `WALRELAY_SHUTDOWN_TIMEOUT="2min": want a duration with a unit, e.g. 30s, 500ms or 2m`},
		{"duration flag without a unit", [2]string{}, []string{"--status-interval", "10"}, `invalid value "10" for flag -status-interval: want a duration with a unit`},
		{"switch in the environment", [2]string{"WALRELAY_CREATE", "no"}, nil, `WALRELAY_CREATE="no": want true or false`},
		{"size with an unknown suffix", [2]string{}, []string{"--max-inflight-bytes", "64M"}, `invalid value "64M" for flag -max-inflight-bytes: want a number of bytes, e.g. 67108864, 64MiB or 100MB`},
		{"size in the environment", [2]string{"WALRELAY_LAG_WARN_BYTES", "lots"}, nil, `WALRELAY_LAG_WARN_BYTES="lots": want a number of bytes`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			code, _, stderr := run(append([]string{"run", "--pg-url", "postgres://h/db"}, c.args...)...)
			if code != exitConfig || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want 2 with %q:\n%s", code, c.want, stderr)
			}
			if strings.Contains(stderr, "parse error") || strings.Contains(stderr, "Usage:") {
				t.Errorf("says only \"parse error\", or prints the whole usage:\n%s", stderr)
			}
		})
	}
}

// TestSizeSuffixes: byte settings take decimal and binary suffixes.
func TestSizeSuffixes(t *testing.T) {
	t.Setenv("WALRELAY_MAX_INFLIGHT_BYTES", "64MiB") // not the default (16 MiB)
	var cfg config
	fs := newFlagSet("run", &cfg)
	args := []string{"--kafka-max-message-bytes", "1MB", "--lag-warn-bytes", "2GiB", "--pg-max-message-bytes", "128 KiB"}
	if err := kit.Parse(fs, args, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if cfg.Sink.MaxInflightBytes != 64*1024*1024 || cfg.MaxMessageBytes != 1000*1000 || cfg.LagWarnBytes != 2*1024*1024*1024 || cfg.Replication.MaxMessageBytes != 128*1024 {
		t.Errorf("max-inflight %d, kafka-max-message %d, lag-warn %d, pg-max-message %d: want 67108864, 1000000, 2147483648, 131072",
			cfg.Sink.MaxInflightBytes, cfg.MaxMessageBytes, cfg.LagWarnBytes, cfg.Replication.MaxMessageBytes)
	}
}

// TestUnknownEnvironmentVariableWarns: a WALRELAY_* variable that is no
// setting is named, with the closest one, before the error it may cause.
func TestUnknownEnvironmentVariableWarns(t *testing.T) {
	t.Setenv("WALRELAY_BROKER", "kafka:9092")
	t.Setenv("WALRELAY_PG_URLL", "postgres://h/db")
	code, _, stderr := run("run")
	for _, want := range []string{
		"WALRELAY_BROKER is set but is no walrelay setting: ignored; did you mean WALRELAY_BROKERS?",
		"WALRELAY_PG_URLL is set but is no walrelay setting: ignored; did you mean WALRELAY_PG_URL?",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code != exitConfig || strings.Index(stderr, "WALRELAY_PG_URLL") > strings.Index(stderr, "set --pg-url or WALRELAY_PG_URL") {
		t.Errorf("exit %d, want 2 with the warnings before the error:\n%s", code, stderr)
	}
}

// TestFlagMistakeHints: a switch given its value after a space, and a
// misspelt flag, are answered in one line that says what to type.
func TestFlagMistakeHints(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--create", "false"}, `unexpected argument "false" after --create: a switch takes its value after '=': --create=false`},
		{[]string{"check", "--create-topics", "false"}, "--create-topics=false"},
		{[]string{"run", "--broker", "kafka:9092"}, "unknown flag --broker: did you mean --brokers?"},
		{[]string{"status", "--slott", "x"}, "unknown flag --slott: did you mean --slot?"},
		{[]string{"setup", "--rotate-pasword"}, "unknown flag --rotate-pasword: did you mean --rotate-password?"},
		{[]string{"run", "--nope"}, "unknown flag --nope ('walrelay run -h' lists its flags)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, _, stderr := run(c.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != exitConfig || !strings.Contains(first, c.want) {
				t.Errorf("exit %d, want 2 with %q on the first line:\n%s", code, c.want, stderr)
			}
			if n := strings.Count(stderr, "\n"); n > 3 {
				t.Errorf("%d lines of output, want the hint alone:\n%s", n, stderr)
			}
		})
	}
}

// TestSubcommandHelpListsItsOwnFlags: each sub-command's -h lists the flags
// it takes, not every flag of run.
func TestSubcommandHelpListsItsOwnFlags(t *testing.T) {
	cases := []struct {
		cmd          string
		want, absent []string
	}{
		{"run", []string{"-pg-url", "-brokers", "-http-addr", "-shutdown-timeout"}, []string{"-role"}},
		{"check", []string{"-pg-url", "-brokers", "-table", "-dlq-topic", "-kafka-sasl-mechanism"}, []string{"-http-addr", "-shutdown-timeout", "-kafka-linger", "-log-format"}},
		{"status", []string{"-pg-url", "-slot", "-publication"}, []string{"-brokers", "-http-addr", "-topic", "-table"}},
		{"setup", []string{"-pg-url", "-slot", "-publication", "-table", "-role", "-print", "-rotate-password"}, []string{"-brokers", "-http-addr", "-topic"}},
		{"health", []string{"-url"}, []string{"-pg-url", "-brokers"}},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			code, stdout, stderr := run(c.cmd, "-h")
			help := stdout + stderr
			if code != exitOK {
				t.Errorf("exit %d, want 0", code)
			}
			flags := map[string]bool{}
			for _, line := range strings.Split(help, "\n") {
				if strings.HasPrefix(line, "  -") {
					flags[strings.Fields(line)[0]] = true
				}
			}
			for _, f := range c.want {
				if !flags[f] {
					t.Errorf("%s -h lacks %s:\n%s", c.cmd, f, help)
				}
			}
			for _, f := range c.absent {
				if flags[f] {
					t.Errorf("%s -h lists %s, which it does not take", c.cmd, f)
				}
			}
		})
	}
}

// TestHealthFollowsHTTPAddr: `walrelay health` probes the port
// WALRELAY_HTTP_ADDR names, as run serves it.
func TestHealthFollowsHTTPAddr(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ready"))
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WALRELAY_HTTP_ADDR", ":"+port)
	code, stdout, stderr := run("health")
	if code != exitOK || !strings.Contains(stdout, "200 OK ready") {
		t.Errorf("health with WALRELAY_HTTP_ADDR=:%s: exit %d, want 0 with 200 OK:\n%s%s", port, code, stdout, stderr)
	}
	t.Setenv("WALRELAY_HTTP_ADDR", "")
	if code, _, stderr := run("health"); code != exitConfig || !strings.Contains(stderr, "WALRELAY_HTTP_ADDR is empty") {
		t.Errorf("health with WALRELAY_HTTP_ADDR empty: exit %d, want 2:\n%s", code, stderr)
	}
}

// TestVersion: --version works like the version command, and the version
// set at build time is the one reported.
func TestVersion(t *testing.T) {
	code, stdout, stderr := run("--version")
	if code != exitOK || !strings.HasPrefix(stdout, "walrelay ") {
		t.Errorf("walrelay --version: exit %d, want 0 with the version:\n%s%s", code, stdout, stderr)
	}
	bin := filepath.Join(t.TempDir(), "walrelay")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-stamped", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, arg := range []string{"--version", "version"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil || string(out) != "walrelay v9.8.7-stamped\n" {
			t.Errorf("walrelay %s: %v, %q; want \"walrelay v9.8.7-stamped\"", arg, err, out)
		}
	}
}

// TestLogDurationsHaveUnits: a duration field reads "8s", never a bare 8.
func TestLogDurationsHaveUnits(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x", zap.Duration("backoff", 8*time.Second), zap.Duration("timeout", 1500*time.Millisecond))
	if !strings.Contains(buf.String(), `"backoff":"8s"`) || !strings.Contains(buf.String(), `"timeout":"1.5s"`) {
		t.Errorf("log line %s: want \"backoff\":\"8s\" and \"timeout\":\"1.5s\"", buf.String())
	}
}

// TestEnvironmentWarningsOfOtherCommands: a command other than run that goes
// on logs the environment's warnings as it logs everything (--log-format
// json: one JSON line each, level warn), and names none of the test
// suites' own variables.
func TestEnvironmentWarningsOfOtherCommands(t *testing.T) {
	t.Setenv("WALRELAY_BROKER", "kafka:9092")
	t.Setenv("WALRELAY_CHAOS", "1")
	t.Setenv("WALRELAY_EXPLORE_SEED", "7")
	t.Setenv("WALRELAY_TEST_PG_VERSION", "18")
	code, stdout, stderr := run("setup", "--print", "--log-format", "json", "--role", "")
	if code != exitOK || !strings.Contains(stdout, "CREATE PUBLICATION") {
		t.Fatalf("setup --print: exit %d, want 0 with the SQL\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var warned bool
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line == "" {
			continue
		}
		var entry struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("stderr line %q is no JSON log line: %v", line, err)
			continue
		}
		if entry.Level == "warn" && strings.Contains(entry.Msg, "WALRELAY_BROKER is set but is no walrelay setting") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warn line about WALRELAY_BROKER on stderr:\n%s", stderr)
	}
	for _, v := range []string{"WALRELAY_CHAOS", "WALRELAY_EXPLORE_SEED", "WALRELAY_TEST_PG_VERSION"} {
		if strings.Contains(stderr, v) {
			t.Errorf("stderr names %s, a test suite's variable:\n%s", v, stderr)
		}
	}
}
