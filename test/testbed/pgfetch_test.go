package testbed

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetchPostgresFromMaven: the fallback source yields the same layout as
// npm: a server that runs and is the pinned release, with pgoutput.
func TestFetchPostgresFromMaven(t *testing.T) {
	t.Parallel()
	bin, err := fetchPG(context.Background(), "14", fromMaven, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("postgres --version: %v\n%s", err, out)
	}
	if want := "(PostgreSQL) " + pgReleases["14"].maven[:strings.LastIndexByte(pgReleases["14"].maven, '.')]; !strings.Contains(string(out), want) {
		t.Errorf("postgres --version = %q, want %q", out, want)
	}
}
