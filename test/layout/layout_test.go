package layout

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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

// TestMakeTestListsTheDisruptiveE2ETests: the Makefile's E2E_DISRUPTIVE
// names exactly the tests of package test/e2e that call testbed.Disrupt
// and that make test's TEST_SKIP does not leave out: make test's shared bed
// skips them (they would wait there for every other package to end) and
// its bed of the newest PostgreSQL runs them with the rest of test/e2e.
func TestMakeTestListsTheDisruptiveE2ETests(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	variable := func(name string) string {
		for _, l := range strings.Split(string(mk), "\n") {
			if v, ok := strings.CutPrefix(l, name+" = "); ok {
				return strings.ReplaceAll(v, "$$", "$")
			}
		}
		t.Fatalf("the Makefile sets no %s", name)
		return ""
	}
	skip := regexp.MustCompile(variable("TEST_SKIP"))
	listed := map[string]bool{}
	for _, name := range strings.Split(variable("E2E_DISRUPTIVE"), "|") {
		listed[name] = true
	}

	dir := filepath.Join(root, "test", "e2e")
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool { return strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	disrupt := map[string]bool{}
	tests := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") {
					continue
				}
				tests++
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Disrupt" {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testbed" {
							disrupt[fn.Name.Name] = true
						}
					}
					return true
				})
			}
		}
	}
	if tests < 50 || len(disrupt) == 0 {
		t.Fatalf("found %d tests in %s, %d calling testbed.Disrupt: not the e2e package", tests, dir, len(disrupt))
	}
	for name := range disrupt {
		if !listed[name] && !skip.MatchString(name) {
			t.Errorf("%s calls testbed.Disrupt: add it to the Makefile's E2E_DISRUPTIVE, or make test's shared bed waits for it", name)
		}
	}
	for name := range listed {
		if !disrupt[name] {
			t.Errorf("the Makefile's E2E_DISRUPTIVE names %s, not a test of test/e2e calling testbed.Disrupt: make test would not run it on its first PostgreSQL", name)
		}
	}
}
