package cli

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestSuggest(t *testing.T) {
	names := []string{"brokers", "pg-url", "slot", "rotate-password"}
	for name, want := range map[string]string{"broker": "brokers", "pg-ur": "pg-url", "slott": "slot", "rotate-pasword": "rotate-password", "nope": "", "x": ""} {
		if got := Suggest(name, names); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"67108864": 64 << 20, "64MiB": 64 << 20, "64 mib": 64 << 20, "1MB": 1000 * 1000, "2GiB": 2 << 30, "-1": -1, "7B": 7} {
		if got, err := parseSize(s); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"64M", "lots", "", "9999999999GiB"} {
		if _, err := parseSize(s); err == nil {
			t.Errorf("parseSize(%q) accepted", s)
		}
	}
}

// TestParseEnvironmentOverlay: a flag not given takes its variable; one
// given keeps its value; a bad variable names itself and the format.
func TestParseEnvironmentOverlay(t *testing.T) {
	k := Kit{Program: "prog", EnvPrefix: "CLITEST_"}
	t.Setenv("CLITEST_WAIT", "3s")
	t.Setenv("CLITEST_NAME", "from-env")
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	var wait time.Duration
	DurationVar(fs, &wait, "wait", time.Second, "")
	name := fs.String("name", "", "")
	if err := k.Parse(fs, []string{"--name", "from-flag"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if wait != 3*time.Second || *name != "from-flag" {
		t.Errorf("wait %s, name %q: want 3s from the environment, from-flag from the command line", wait, *name)
	}
	t.Setenv("CLITEST_WAIT", "30")
	err := k.Parse(flag.NewFlagSet("cmd", flag.ContinueOnError), nil, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("a variable of no flag: %v", err)
	}
	fs = flag.NewFlagSet("cmd", flag.ContinueOnError)
	DurationVar(fs, &wait, "wait", time.Second, "")
	if err := k.Parse(fs, nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `CLITEST_WAIT="30": want a duration with a unit`) {
		t.Errorf("error %v, want the variable and the format", err)
	}
	if err := k.Parse(fs, []string{"--waitt", "1s"}, &bytes.Buffer{}); err == nil || err.Error() != "unknown flag --waitt: did you mean --wait? ('prog cmd -h' lists its flags)" {
		t.Errorf("error %v, want a did-you-mean", err)
	}
}
