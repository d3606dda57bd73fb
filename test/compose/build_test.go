package compose

import (
	"debug/buildinfo"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeBuildIsStatic: make build gives the binary the README promises
// and the image ships: statically linked (no interpreter, no shared
// libraries), built without cgo and with -trimpath, stripped, and stamped
// with make's VERSION. It was once linked to libc (cgo), which the image
// test did not see: the image builds its own.
func TestMakeBuildIsStatic(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "walrelay")
	cmd := exec.Command("make", "--no-print-directory", "build", "BUILD_OUT="+bin, "VERSION="+testVersion)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("make build's binary names an interpreter (PT_INTERP): it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("make build's binary needs shared libraries %q (%v), want none", libs, err)
	}
	for _, name := range []string{".symtab", ".debug_info", ".zdebug_info"} {
		if f.Section(name) != nil {
			t.Errorf("make build's binary has section %s: it is not stripped (-s -w)", name)
		}
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != v {
			t.Errorf("make build's binary has build setting %s=%q, want %q", k, settings[k], v)
		}
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "walrelay "+testVersion {
		t.Errorf("make build's walrelay version printed %q (%v), want %q", got, err, "walrelay "+testVersion)
	}
}
