package compose

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/test/testbed"
)

// repoRoot is the repository, relative to this package's directory (where go
// test runs the tests).
var repoRoot = filepath.Join("..", "..")

// testVersion is what the Dockerfile's VERSION build argument is set to for
// the test build; `walrelay version` must print it.
const testVersion = "compose-test"

// relayBin is walrelay built as the Dockerfile builds it; buildErr says why
// it could not be.
var (
	relayBin string
	buildErr error
)

func TestMain(m *testing.M) {
	// N.B. first: as the image's init (TestImage), the binary runs no test.
	if spec := os.Getenv(imageInitEnv); spec != "" {
		os.Exit(imageInit(spec))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-compose-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	relayBin, buildErr = dockerBuild(dir)
	return testbed.Main(m)
}

// binary returns the walrelay binary or fails the test with the reason it
// could not be built.
func binary(t testing.TB) string {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("build walrelay as the Dockerfile does: %v", buildErr)
	}
	return relayBin
}

// dockerBuild copies the files .dockerignore leaves into dir/context and runs
// the Dockerfile's go build there, with VERSION set to testVersion, for the
// machine's platform.
func dockerBuild(dir string) (string, error) {
	df, err := readDockerfile()
	if err != nil {
		return "", err
	}
	gb, err := df.goBuild()
	if err != nil {
		return "", err
	}
	ignore, err := readDockerignore()
	if err != nil {
		return "", err
	}
	ctxDir := filepath.Join(dir, "context")
	if err := copyContext(repoRoot, ctxDir, ignore); err != nil {
		return "", fmt.Errorf("copy the build context: %w", err)
	}
	bin := filepath.Join(dir, "walrelay")
	args := []string{"build"}
	if gb.trimpath {
		args = append(args, "-trimpath")
	}
	if gb.ldflags != "" {
		ld := strings.NewReplacer("${VERSION}", testVersion, "$VERSION", testVersion).Replace(gb.ldflags)
		args = append(args, "-ldflags", ld)
	}
	args = append(args, "-o", bin, gb.pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	for k, v := range gb.env {
		if k != "GOOS" && k != "GOARCH" { // the machine's platform
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s in the context .dockerignore leaves: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// dockerignore is .dockerignore's patterns in order; a later match wins.
type dockerignore []string

func readDockerignore() (dockerignore, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	var pats dockerignore
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") {
			return nil, fmt.Errorf(".dockerignore pattern %q: this test does not implement **", line)
		}
		neg := strings.HasPrefix(line, "!")
		p := path.Clean(strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/"))
		if neg {
			p = "!" + p
		}
		pats = append(pats, p)
	}
	return pats, nil
}

// excluded reports whether Docker leaves rel (slash-separated, relative to the
// context) out: a pattern matches the path or one of its parent directories.
func (d dockerignore) excluded(rel string) bool {
	out := false
	for _, p := range d {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		for q := rel; q != "." && q != "/"; q = path.Dir(q) {
			if ok, _ := path.Match(p, q); ok {
				out = !neg
				break
			}
		}
	}
	return out
}

func copyContext(src, dst string, ignore dockerignore) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return os.MkdirAll(dst, 0o755)
		}
		if ignore.excluded(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
