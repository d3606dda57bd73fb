package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateRelease = flag.Bool("update-release", false, "rewrite testdata/flags-release.txt from this tree (only when cutting a release)")

// releaseCommands are the commands whose flags a user sets.
var releaseCommands = []string{"run", "check", "status", "setup", "import-debezium", "health"}

// flagLine is one flag as a command's -h prints it: "  -name type".
var flagLine = regexp.MustCompile(`^  -([a-z0-9-]+)(?: (\S+))?$`)

// helpFlags reads "COMMAND -NAME TYPE DEFAULT" lines out of the binary's
// help, the way a user reads it.
func helpFlags(t *testing.T, bin string) []string {
	var out []string
	for _, cmd := range releaseCommands {
		b, _ := exec.Command(bin, cmd, "-h").CombinedOutput()
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			m := flagLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			typ := m[2]
			if typ == "" {
				typ = "switch"
			}
			def := "-"
			if i+1 < len(lines) {
				if _, d, ok := cutLast(lines[i+1], " (default "); ok {
					def = strings.TrimSuffix(d, ")")
				}
			}
			out = append(out, cmd+" -"+m[1]+" "+typ+" "+def)
		}
	}
	slices.Sort(out)
	return out
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// TestFlagsMatchPreviousRelease: every command takes the flags of the
// previous release (8e87de4), with the same type and default, as its help
// shows them (testdata/flags-release.txt was captured from that release's
// binary), and every WALRELAY_* variable of those flags is still one
// walrelay knows: a rolling upgrade keeps its command line and environment.
// A flag may be added by appending it to the file; none may go or change.
func TestFlagsMatchPreviousRelease(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "walrelay")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got := helpFlags(t, bin)
	const path = "testdata/flags-release.txt"
	if *updateRelease {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(want) < 100 {
		t.Fatalf("%s lists %d flags: it is not the release's set", path, len(want))
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("the previous release had %q; this binary's help does not", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("this binary has %q, which the previous release did not (a new flag goes into %s too)", g, path)
		}
	}

	// Every variable of those flags, set to the flag's default, is taken
	// without a warning that it is no setting, and parses.
	env := os.Environ()
	seen := map[string]bool{}
	for _, w := range want {
		f := strings.SplitN(w, " ", 4)
		name := "WALRELAY_" + strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(f[1], "-"), "-", "_"))
		if seen[name] {
			continue
		}
		seen[name] = true
		v := strings.Trim(f[3], `"`)
		switch {
		case f[3] != "-":
		case f[2] == "switch":
			v = "false"
		case f[2] == "string" || f[2] == "value":
			v = ""
		default:
			continue // a zero number or duration the flag may refuse
		}
		if name == "WALRELAY_PRINT" || name == "WALRELAY_PG_URL" || name == "WALRELAY_PG_URL_FILE" {
			continue // set on the command line below
		}
		env = append(env, name+"="+v)
	}
	env = append(env, "WALRELAY_KAFKA_SASL_PASSWORD=x", "WALRELAY_SETUP_ROLE_PASSWORD=x")
	cmd := exec.Command(bin, "setup", "--print", "--pg-url", "postgres://walrelay@127.0.0.1:1/db")
	cmd.Env = env
	out, _ := cmd.CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "is no walrelay setting") || regexp.MustCompile(`WALRELAY_[A-Z0-9_]+=".*": `).MatchString(l) {
			t.Errorf("walrelay setup with the previous release's variables: %s", l)
		}
	}
	if len(seen) < 60 {
		t.Fatalf("only %d variables checked", len(seen))
	}
}
