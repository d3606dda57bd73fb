package jvm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestArgv(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Command
		want []string
	}{
		{"kafka", Command{
			Options: []string{"-Xms256m", "-Xmx768m"}, Props: []string{"java.awt.headless=true", "kafka.logs.dir=/l"},
			Libs: "/jars", Main: "kafka.Kafka", Args: []string{"/c/server.properties"},
		}, []string{"-Xms256m", "-Xmx768m", "-Djava.awt.headless=true", "-Dkafka.logs.dir=/l", "-cp", "/jars/*", "kafka.Kafka", "/c/server.properties"}},
		{"no options", Command{Libs: "/jars", Main: "M"}, []string{"-cp", "/jars/*", "M"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Argv(); !slices.Equal(got, tc.want) {
				t.Fatalf("Argv() = %q, want %q", got, tc.want)
			}
		})
	}
	// Argv must not write into the caller's Options.
	opts := make([]string, 1, 8)
	opts[0] = "-Xmx1G"
	Command{Options: opts, Libs: "/a", Main: "A"}.Argv()
	if got := opts[:2]; got[1] != "" {
		t.Fatalf("Argv wrote %q into the caller's Options", got[1])
	}
}

func TestHeap(t *testing.T) {
	if got := Heap(256, 768); !slices.Equal(got, []string{"-Xms256m", "-Xmx768m"}) {
		t.Fatalf("Heap = %q", got)
	}
}

func TestLog4j2(t *testing.T) {
	dir := t.TempDir()
	props, err := Log4j2(dir, []byte("rootLogger.level = INFO\n"), "connect.logs.dir", "/logs")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "log4j2.properties")
	if want := []string{"connect.logs.dir=/logs", "log4j2.configurationFile=" + path}; !slices.Equal(props, want) {
		t.Fatalf("props %q, want %q", props, want)
	}
	if b, _ := os.ReadFile(path); string(b) != "rootLogger.level = INFO\n" {
		t.Fatalf("wrote %q", b)
	}
}

func TestWriteProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.properties")
	if err := WriteProperties(path, map[string]string{"b": `C:\x`, "a": "1", "c.d": "x=y"}); err != nil {
		t.Fatal(err)
	}
	want := "a=1\nb=C:\\\\x\nc.d=x=y\n"
	if b, _ := os.ReadFile(path); string(b) != want {
		t.Fatalf("wrote %q, want %q", b, want)
	}
}

// fakeMvn puts an mvn in PATH that logs each run to calls and copies the
// jars named in $FAKE_MVN_JARS into -DoutputDirectory.
func fakeMvn(t *testing.T, jars string) (calls string) {
	t.Helper()
	bin := t.TempDir()
	calls = filepath.Join(bin, "calls")
	script := `#!/bin/sh
echo "$@" >> ` + calls + `
for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";; esac; done
mkdir -p "$out"
for j in $FAKE_MVN_JARS; do : > "$out/$j"; done
`
	if err := os.WriteFile(filepath.Join(bin, "mvn"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_MVN_JARS", jars)
	return calls
}

func runs(t *testing.T, calls string) int {
	b, err := os.ReadFile(calls)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	logf := func(string, ...any) {}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	j := Jars{Name: "Test 1.0", Dir: "test-1.0", POM: []byte("<project>1</project>"), Want: []string{"a-1.0.jar"}}
	libs := filepath.Join(cache, "walrelay", "test-1.0", "libs")

	t.Run("first fetch runs mvn and writes the marker", func(t *testing.T) {
		calls := fakeMvn(t, "a-1.0.jar b.jar")
		got, err := j.Fetch(ctx, logf)
		if err != nil {
			t.Fatal(err)
		}
		if got != libs {
			t.Fatalf("libs %s, want %s", got, libs)
		}
		if n := runs(t, calls); n != 1 {
			t.Fatalf("mvn ran %d times, want 1", n)
		}
		b, _ := os.ReadFile(calls)
		if !strings.Contains(string(b), "dependency:copy-dependencies") || !strings.Contains(string(b), "-DincludeScope=runtime") {
			t.Fatalf("mvn arguments: %s", b)
		}
		if pom, _ := os.ReadFile(filepath.Join(cache, "walrelay", "test-1.0", "pom.xml")); string(pom) != string(j.POM) {
			t.Fatalf("pom.xml %q", pom)
		}
	})
	// fetch fetches with an mvn that copies a-1.0.jar and returns how often
	// it ran.
	fetch := func(t *testing.T, j Jars) int {
		t.Helper()
		calls := fakeMvn(t, "a-1.0.jar")
		if _, err := j.Fetch(ctx, logf); err != nil {
			t.Fatal(err)
		}
		return runs(t, calls)
	}
	t.Run("cached: no mvn", func(t *testing.T) {
		if n := fetch(t, j); n != 0 {
			t.Fatalf("mvn ran %d times on a cached set", n)
		}
	})
	t.Run("another pom fetches again", func(t *testing.T) {
		j2 := j
		j2.POM = []byte("<project>2</project>")
		if n := fetch(t, j2); n != 1 {
			t.Fatalf("mvn ran %d times for a changed pom, want 1", n)
		}
		if _, err := os.Stat(filepath.Join(libs, "b.jar")); !os.IsNotExist(err) {
			t.Fatalf("b.jar of the old set is still there (%v)", err)
		}
	})
	t.Run("a wanted jar missing", func(t *testing.T) {
		fakeMvn(t, "other.jar")
		j3 := j
		j3.POM = []byte("<project>3</project>")
		_, err := j3.Fetch(ctx, logf)
		if err == nil || !strings.Contains(err.Error(), "mvn left no a-1.0.jar") {
			t.Fatalf("Fetch = %v, want mvn left no a-1.0.jar", err)
		}
		// No marker: the next run fetches again.
		if n := fetch(t, j3); n != 1 {
			t.Fatalf("mvn ran %d times after a failed fetch, want 1", n)
		}
	})
	t.Run("no mvn", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		j4 := j
		j4.POM = []byte("<project>4</project>")
		_, err := j4.Fetch(ctx, logf)
		if err == nil || !strings.Contains(err.Error(), "mvn not found in PATH") || !strings.Contains(err.Error(), "apt-get install -y maven") {
			t.Fatalf("Fetch = %v, want mvn not found with the install hint", err)
		}
	})
}

func TestFind(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Find("Kafka 4.4.0")
	if err == nil || !strings.Contains(err.Error(), "Kafka 4.4.0 needs Java 17") {
		t.Fatalf("Find = %v", err)
	}
}
