package jvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/test/proc"
)

// fetchWithin bounds one mvn run (a first download of Connect and Debezium
// is about 150 MB).
const fetchWithin = 15 * time.Minute

// Jars is the set of jars a pom.xml names.
type Jars struct {
	// Name says what they are in messages: "Kafka 4.4.0".
	Name string
	// Dir is their cache directory below ${XDG_CACHE_HOME:-~/.cache}/walrelay,
	// named after the versions: "kafka-4.4.0".
	Dir string
	// POM is the pom.xml whose runtime dependencies mvn copies.
	POM []byte
	// Want are jars mvn must have copied (file names); one missing is an
	// error.
	Want []string
}

// Fetch returns the directory of the jars (DIR/libs), fetching them with mvn
// the first time.
func (j Jars) Fetch(ctx context.Context, logf func(string, ...any)) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		root = filepath.Join(os.TempDir(), "walrelay-cache")
	}
	base := filepath.Join(root, "walrelay")
	dir := filepath.Join(base, j.Dir)
	libs := filepath.Join(dir, "libs")
	marker := filepath.Join(dir, "complete")
	sum := sha256.Sum256(j.POM)
	want := hex.EncodeToString(sum[:])
	done := func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && strings.TrimSpace(string(b)) == want
	}
	if done() {
		return libs, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	lockPath := dir + ".lock"
	release, err := proc.LockFile(lockPath, syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		logf("waiting for another process fetching the %s jars (%s)", j.Name, lockPath)
		if release, err = proc.LockFile(lockPath, syscall.LOCK_EX); err != nil {
			return "", err
		}
	}
	defer release()
	if done() {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("mvn not found in PATH (needed once, to fetch the %s jars from Maven Central into %s): apt-get install -y maven", j.Name, dir)
	}
	logf("fetching the %s jars with mvn into %s (once)", j.Name, libs)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pom := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pom, j.POM, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, fetchWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-Dstyle.color=never", "-f", pom,
		"dependency:copy-dependencies", "-DoutputDirectory="+libs, "-DincludeScope=runtime")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fetch %s jars: mvn: %w\n%s", j.Name, err, out)
	}
	for _, jar := range j.Want {
		if _, err := os.Stat(filepath.Join(libs, jar)); err != nil {
			return "", fmt.Errorf("fetch %s jars: mvn left no %s in %s", j.Name, jar, libs)
		}
	}
	if err := proc.WriteFileAtomic(marker, []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	return libs, nil
}
