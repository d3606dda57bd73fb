package compose

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var pinnedRE = regexp.MustCompile(`^[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
	line int
}

// dockerfile is the Dockerfile split into stages.
type dockerfile struct {
	stages [][]instruction // each begins with its FROM
}

func readDockerfile() (*dockerfile, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return nil, err
	}
	df := &dockerfile{}
	var cur *instruction
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (cur == nil && trimmed == "") {
			continue
		}
		if cur == nil {
			cmd, args, _ := strings.Cut(trimmed, " ")
			cur = &instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: i + 1}
		} else {
			cur.args += " " + trimmed
		}
		if strings.HasSuffix(cur.args, `\`) {
			cur.args = strings.TrimSpace(strings.TrimSuffix(cur.args, `\`))
			continue
		}
		if cur.cmd == "FROM" {
			df.stages = append(df.stages, nil)
		}
		if len(df.stages) == 0 {
			if cur.cmd != "ARG" {
				return nil, fmt.Errorf("Dockerfile:%d: %s before the first FROM", cur.line, cur.cmd)
			}
		} else {
			n := len(df.stages) - 1
			df.stages[n] = append(df.stages[n], *cur)
		}
		cur = nil
	}
	if len(df.stages) == 0 {
		return nil, fmt.Errorf("Dockerfile has no FROM")
	}
	return df, nil
}

// from returns stage i's image and name (FROM [--platform=...] image [AS name]).
func (df *dockerfile) from(i int) (image, name string) {
	var fields []string
	for _, f := range strings.Fields(df.stages[i][0].args) {
		if !strings.HasPrefix(f, "--") {
			fields = append(fields, f)
		}
	}
	if len(fields) > 0 {
		image = fields[0]
	}
	if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
		name = fields[2]
	}
	return image, name
}

func (df *dockerfile) final() []instruction { return df.stages[len(df.stages)-1] }

// last returns the last args of cmd in the final stage.
func (df *dockerfile) last(cmd string) (string, bool) {
	var args string
	found := false
	for _, in := range df.final() {
		if in.cmd == cmd {
			args, found = in.args, true
		}
	}
	return args, found
}

// execForm parses a JSON-array (exec form) ENTRYPOINT or CMD.
func execForm(args string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(args), &out); err != nil {
		return nil, fmt.Errorf("%s is not in exec form ([\"...\"]): %v", args, err)
	}
	return out, nil
}

// goBuildCmd is the go build the Dockerfile runs.
type goBuildCmd struct {
	env      map[string]string // VAR=value words before "go build"
	trimpath bool
	ldflags  string
	out      string // -o
	pkg      string
	stage    string // the stage's name
}

// shellWords splits s into words, honouring double and single quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func (df *dockerfile) goBuild() (goBuildCmd, error) {
	for i, st := range df.stages {
		for _, in := range st {
			if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
				continue
			}
			words := shellWords(in.args)
			gb := goBuildCmd{env: map[string]string{}}
			_, gb.stage = df.from(i)
			j := 0
			for ; j+1 < len(words) && !(words[j] == "go" && words[j+1] == "build"); j++ {
				if k, v, ok := strings.Cut(words[j], "="); ok && !strings.HasPrefix(k, "-") && strings.ToUpper(k) == k {
					gb.env[k] = v
				}
			}
			rest := words[j+2:]
			for k := 0; k < len(rest); k++ {
				switch w := rest[k]; {
				case w == "-trimpath":
					gb.trimpath = true
				case w == "-ldflags" && k+1 < len(rest):
					k++
					gb.ldflags = rest[k]
				case strings.HasPrefix(w, "-ldflags="):
					gb.ldflags = strings.TrimPrefix(w, "-ldflags=")
				case w == "-o" && k+1 < len(rest):
					k++
					gb.out = rest[k]
				case w == "&&" || w == ";":
					k = len(rest)
				case !strings.HasPrefix(w, "-"):
					gb.pkg = w
				}
			}
			if gb.pkg == "" {
				return gb, fmt.Errorf("Dockerfile:%d: go build names no package", in.line)
			}
			return gb, nil
		}
	}
	return goBuildCmd{}, fmt.Errorf("Dockerfile has no RUN ... go build")
}

func TestDockerfile(t *testing.T) {
	df, err := readDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	if len(df.stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a build stage and a small final stage", len(df.stages))
	}
	gb, err := df.goBuild()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("bases pinned by digest", func(t *testing.T) {
		for i := range df.stages {
			image, _ := df.from(i)
			if image == "scratch" {
				continue
			}
			// N.B. name:tag@sha256:<64 hex>: the tag for the reader, the
			// digest decides; a tag alone moves under the build.
			if !pinnedRE.MatchString(image) {
				t.Errorf("stage %d FROM %s: want name:tag@sha256:<64 hex digits>", i, image)
			}
		}
	})

	t.Run("build stage", func(t *testing.T) {
		image, _ := df.from(0)
		if !strings.HasPrefix(image, "golang:1.26") {
			t.Errorf("build stage FROM %s, want golang:1.26 (go.mod's go version)", image)
		}
		// N.B. the Go the image builds with is the one make test proves
		// free of reachable vulnerabilities (make vuln): the Makefile's
		// GOTOOLCHAIN, which .ci/run prints.
		want, err := makefileToolchain()
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, in := range df.stages[0] {
			if k, v, ok := strings.Cut(in.args, "="); in.cmd == "ENV" && ok && strings.TrimSpace(k) == "GOTOOLCHAIN" {
				got = strings.TrimSpace(v)
			}
		}
		if got != want {
			t.Errorf("build stage ENV GOTOOLCHAIN=%q, want the Makefile's %q", got, want)
		}
		ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(ci), "\nexport GOTOOLCHAIN="+want+"\n") {
			t.Errorf(".ci/run does not export GOTOOLCHAIN=%s, the Makefile's", want)
		}
		if gb.env["CGO_ENABLED"] != "0" {
			t.Errorf("go build runs with CGO_ENABLED=%q, want 0: the final image has no C library", gb.env["CGO_ENABLED"])
		}
		if !gb.trimpath {
			t.Error("go build lacks -trimpath")
		}
		for _, f := range []string{"-s", "-w", "-X main.version="} {
			if !strings.Contains(gb.ldflags, f) {
				t.Errorf("go build -ldflags %q lacks %s", gb.ldflags, f)
			}
		}
		if gb.pkg != "./cmd/walrelay" {
			t.Errorf("go build builds %s, want ./cmd/walrelay", gb.pkg)
		}
	})

	t.Run("version is stamped", func(t *testing.T) {
		out, err := exec.Command(binary(t), "version").CombinedOutput()
		if err != nil {
			t.Fatalf("walrelay version: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "walrelay "+testVersion {
			t.Errorf("walrelay version printed %q, want %q: the Dockerfile's -X does not reach main.version", got, "walrelay "+testVersion)
		}
	})

	t.Run("final stage", func(t *testing.T) {
		image, _ := df.from(len(df.stages) - 1)
		if !strings.HasPrefix(image, "gcr.io/distroless/static") && image != "scratch" {
			t.Errorf("final stage FROM %s, want gcr.io/distroless/static-* or scratch (a static binary needs nothing else)", image)
		}
		user, ok := df.last("USER")
		if !ok {
			t.Fatal("final stage sets no USER: the image would run as root")
		}
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("USER %s: want a numeric non-root uid (Kubernetes' runAsNonRoot cannot verify a name)", user)
		}

		ep, ok := df.last("ENTRYPOINT")
		if !ok {
			t.Fatal("final stage has no ENTRYPOINT")
		}
		entry, err := execForm(ep)
		if err != nil {
			t.Fatalf("ENTRYPOINT: %v", err)
		}
		var copied string
		for _, in := range df.final() {
			f := strings.Fields(in.args)
			if in.cmd == "COPY" && len(f) == 3 && f[0] == "--from="+gb.stage && f[1] == gb.out {
				copied = f[2]
			}
		}
		if copied == "" {
			t.Errorf("final stage does not COPY --from=%s %s (the go build output)", gb.stage, gb.out)
		} else if len(entry) != 1 || entry[0] != copied {
			t.Errorf("ENTRYPOINT %v, want [%q] (where the binary is copied)", entry, copied)
		}
		if c, ok := df.last("CMD"); !ok {
			t.Error("final stage has no CMD, want [\"run\"]")
		} else if cmd, err := execForm(c); err != nil || len(cmd) != 1 || cmd[0] != "run" {
			t.Errorf("CMD %s, want [\"run\"]", c)
		}

		expose, _ := df.last("EXPOSE")
		_, port, err := net.SplitHostPort(composeHTTPAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSuffix(expose, "/tcp") != port {
			t.Errorf("EXPOSE %q, want %s (the port walrelay listens on in docker-compose.yml)", expose, port)
		}
	})
}

func TestDockerignore(t *testing.T) {
	ignore, err := readDockerignore()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", ".git/config", "bin/walrelay"} {
		if !ignore.excluded(p) {
			t.Errorf(".dockerignore leaves %s in the build context", p)
		}
	}
	for _, p := range []string{"go.mod", "go.sum", "cmd/walrelay/main.go"} {
		if ignore.excluded(p) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", p)
		}
	}
	// The build of every package the binary needs, from exactly what
	// .dockerignore leaves, is TestMain's.
	binary(t)
}

// makefileToolchain is the Makefile's GOTOOLCHAIN default (GOTOOLCHAIN ?= …).
func makefileToolchain() (string, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "GOTOOLCHAIN ?="); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("the Makefile sets no GOTOOLCHAIN ?= …")
}
