package layout

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	fileBudget   = 600 // lines of a product Go file
	cmdBudget    = 900 // lines of cmd/walrelay's product files together
	readmeBudget = 400
)

// root is the repository's root, two levels up from this package.
var root = filepath.Join("..", "..")

// productFiles are the non-test Go files outside test/ and bench/: what
// walrelay, its libraries (inbox) and its tools are built from.
func productFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "test" || rel == "bench" || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found %d product Go files under %s: not the repository", len(files), root)
	}
	return files
}

func lines(t *testing.T, rel string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// TestFileBudget: no product Go file over 600 lines, cmd/walrelay at most
// 900 in all.
func TestFileBudget(t *testing.T) {
	cmd := 0
	for _, f := range productFiles(t) {
		n := lines(t, f)
		if n > fileBudget {
			t.Errorf("%s has %d lines, over the %d of a product file: split it by idea", f, n, fileBudget)
		}
		if filepath.Dir(f) == filepath.Join("cmd", "walrelay") {
			cmd += n
		}
	}
	if cmd == 0 || cmd > cmdBudget {
		t.Errorf("cmd/walrelay has %d lines, want 1 to %d: what is not flags, wiring and exit codes belongs in a package", cmd, cmdBudget)
	}
}

// TestThinMain: cmd/walrelay and pipeline import neither pgx nor franz-go
// (the stages own their clients; pglogrepl's LSN type may cross).
func TestThinMain(t *testing.T) {
	banned := []string{"github.com/jackc/pgx", "github.com/twmb/franz-go"}
	checked := 0
	for _, f := range productFiles(t) {
		dir := filepath.Dir(f)
		if dir != filepath.Join("cmd", "walrelay") && dir != "pipeline" {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, f), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, b := range banned {
				if strings.HasPrefix(path, b) {
					t.Errorf("%s imports %s: %s talks to PostgreSQL and Kafka only through the stages", f, path, dir)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files of cmd/walrelay and pipeline", checked)
	}
}

// TestReadmeBudget: the README at most 400 lines; the manual is docs/.
func TestReadmeBudget(t *testing.T) {
	if n := lines(t, "README.md"); n > readmeBudget {
		t.Errorf("README.md has %d lines, over %d: move the manual's part to docs/", n, readmeBudget)
	}
}

// TestEveryPackageHasDoc: every library package (not a program) has a
// doc.go whose package comment says what it owns: its input, output and
// invariant.
func TestEveryPackageHasDoc(t *testing.T) {
	dirs := map[string]bool{}
	for _, f := range productFiles(t) {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, f), nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if file.Name.Name != "main" {
			dirs[filepath.Dir(f)] = true
		}
	}
	if len(dirs) < 20 {
		t.Fatalf("found %d library packages: not the repository", len(dirs))
	}
	for dir := range dirs {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("package %s has no doc.go (%v): say what it owns, takes, gives and never does", dir, err)
			continue
		}
		if file.Doc == nil || len(strings.Fields(file.Doc.Text())) < 12 {
			t.Errorf("%s/doc.go has no package comment of substance: say what it owns, takes, gives and never does", dir)
		}
	}
}
