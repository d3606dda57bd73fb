package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func start(t *testing.T, o Options) *Proc {
	t.Helper()
	if o.Log == "" {
		o.Log = filepath.Join(t.TempDir(), "out.log")
	}
	p, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func TestExitCodeEnvDirAndLog(t *testing.T) {
	dir := t.TempDir()
	p := start(t, Options{Name: "sh", Path: "/bin/sh", Args: []string{"-c", `echo "one $PROC_TEST"; pwd; echo two >&2; exit 3`},
		Env: []string{"PROC_TEST=env"}, Dir: dir})
	if !p.Wait(time.Minute) {
		t.Fatal("sh did not exit")
	}
	code, err := p.ExitCode()
	if err != nil || code != 3 {
		t.Fatalf("exit code %d (%v), want 3", code, err)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) {
		t.Fatalf("Err() = %v, want an *exec.ExitError", p.Err())
	}
	want := "one env\n" + dir + "\ntwo\n"
	if got := p.Log(); got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
	if got := p.Tail(2); got != dir+"\ntwo" {
		t.Fatalf("Tail(2) = %q", got)
	}
}

func TestLogIsAppended(t *testing.T) {
	log := filepath.Join(t.TempDir(), "out.log")
	for _, word := range []string{"first", "second"} {
		p := start(t, Options{Path: "/bin/echo", Args: []string{word}, Log: log})
		if !p.Wait(time.Minute) {
			t.Fatal("echo did not exit")
		}
	}
	if b, _ := os.ReadFile(log); string(b) != "first\nsecond\n" {
		t.Fatalf("log %q", b)
	}
}

func TestStop(t *testing.T) {
	t.Run("exits on SIGTERM", func(t *testing.T) {
		p := start(t, Options{Path: "/bin/sleep", Args: []string{"600"}})
		err := p.Stop(time.Minute)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("Stop = %v, want the exit by SIGTERM", err)
		}
		if code, err := p.ExitCode(); code != -1 || err != nil {
			t.Fatalf("ExitCode = %d, %v; want -1 (a signal)", code, err)
		}
	})
	t.Run("killed when it ignores SIGTERM", func(t *testing.T) {
		// The shell says "ready" once its trap is set.
		p := start(t, Options{Path: "/bin/sh", Args: []string{"-c", `trap '' TERM; echo ready; while :; do sleep 1; done`}})
		waitLog(t, p, "ready")
		err := p.Stop(200 * time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("Stop = %v, want killed", err)
		}
		if !p.Exited() {
			t.Fatal("still running after Stop")
		}
	})
	t.Run("exited already", func(t *testing.T) {
		p := start(t, Options{Path: "/bin/true"})
		p.Wait(time.Minute)
		if err := p.Stop(time.Second); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		if err := p.Kill(); err != nil {
			t.Fatalf("Kill = %v", err)
		}
	})
}

func TestKill(t *testing.T) {
	p := start(t, Options{Path: "/bin/sh", Args: []string{"-c", `trap '' TERM INT; echo ready; while :; do sleep 1; done`}})
	waitLog(t, p, "ready")
	if p.Exited() || p.Err() != nil {
		t.Fatalf("Exited %v, Err %v before the kill", p.Exited(), p.Err())
	}
	if _, err := p.ExitCode(); err == nil {
		t.Fatal("ExitCode of a running process has no error")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Err = %v, want killed by SIGKILL", p.Err())
	}
}

// TestProcessGroupAndSession reads the process group and session of the
// child from /proc.
func TestProcessGroupAndSession(t *testing.T) {
	for _, tc := range []struct {
		name             string
		o                Options
		ownGroup, ownSID bool
	}{
		{"default", Options{}, false, false},
		{"group", Options{Group: true}, true, false},
		{"detached", Options{Detached: true}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Path, o.Args = "/bin/sleep", []string{"600"}
			p := start(t, o)
			pgid, sid := groupAndSession(t, p.Pid())
			if (pgid == p.Pid()) != tc.ownGroup || (sid == p.Pid()) != tc.ownSID {
				t.Fatalf("pid %d: pgid %d, sid %d; want own group %v, own session %v", p.Pid(), pgid, sid, tc.ownGroup, tc.ownSID)
			}
		})
	}
}

func groupAndSession(t *testing.T, pid int) (int, int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		// N.B. until exec the child is a copy of this process: wait until
		// its command is sleep.
		b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, "(sleep)") {
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			return atoi(t, f[2]), atoi(t, f[3])
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is not sleep: %s", pid, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMain runs this test binary as TestDeathSignal's starter when
// PROC_TEST_STARTER names a pid file.
func TestMain(m *testing.M) {
	if pidFile := os.Getenv("PROC_TEST_STARTER"); pidFile != "" {
		os.Exit(starter(pidFile))
	}
	os.Exit(m.Run())
}

// starter starts sleep, writes its pid once it runs sleep and exits without
// stopping it.
func starter(pidFile string) int {
	p, err := Start(Options{Path: "/bin/sleep", Args: []string{"600"}, Log: os.DevNull})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for deadline := time.Now().Add(time.Minute); !Alive(p.Pid(), "600"); {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "sleep did not start")
			return 1
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := WriteFileAtomic(pidFile, []byte(itoa(p.Pid())+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestDeathSignal starts this test binary as a starter that starts sleep
// and exits: sleep must die with it.
func TestDeathSignal(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "PROC_TEST_STARTER="+pidFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("starter: %v\n%s", err, out)
	}
	pid := ReadPIDFile(pidFile)
	if pid <= 0 {
		t.Fatalf("starter wrote no pid to %s", pidFile)
	}
	if !WaitGone(pid, "600", time.Minute) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("child %d outlived its starter", pid)
	}
}

func TestSample(t *testing.T) {
	// A shell that spins for a while and then waits.
	p := start(t, Options{Path: "/bin/sh", Args: []string{"-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo spun; exec sleep 600`}, Sample: true})
	waitLog(t, p, "spun")
	if cpu := p.CPU(); cpu <= 0 {
		t.Fatalf("CPU = %v after a busy loop, want > 0", cpu)
	}
	if mb := p.PeakRSSMB(); mb <= 0 {
		t.Fatalf("PeakRSSMB = %v, want > 0", mb)
	}
	cpu := p.CPU()
	_ = p.Kill()
	if got := p.CPU(); got != cpu {
		t.Fatalf("CPU after exit = %v, want the last reading %v", got, cpu)
	}
}

func TestPIDFunctions(t *testing.T) {
	p := start(t, Options{Path: "/bin/sh", Args: []string{"-c", `trap '' TERM; echo ready; while :; do sleep 1; done`, "marker-xyz"}})
	waitLog(t, p, "ready")
	if !Alive(p.Pid(), "marker-xyz") {
		t.Fatal("Alive = false for a running process")
	}
	if Alive(p.Pid(), "another-marker") {
		t.Fatal("Alive = true with a marker its command line does not hold")
	}
	if WaitGone(p.Pid(), "marker-xyz", 100*time.Millisecond) {
		t.Fatal("WaitGone = true for a running process")
	}
	// It ignores SIGTERM: StopPID kills it after the grace period.
	if err := StopPID(p.Pid(), "marker-xyz", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if Alive(p.Pid(), "marker-xyz") {
		t.Fatal("Alive after StopPID")
	}
	if err := StopPID(p.Pid(), "marker-xyz", time.Second); err != nil {
		t.Fatalf("StopPID of a stopped process: %v", err)
	}
	if err := KillPID(p.Pid(), "marker-xyz"); err == nil {
		t.Fatal("KillPID of a stopped process: no error")
	}
}

func TestReadPIDFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		want    int
	}{
		{"1234\n", 1234},
		{"567\n/var/lib/postgresql/data\n1700000000\n", 567}, // postmaster.pid
		{"", 0},
		{"x\n", 0},
	} {
		path := filepath.Join(dir, "pid")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := ReadPIDFile(path); got != tc.want {
			t.Errorf("ReadPIDFile(%q) = %d, want %d", tc.content, got, tc.want)
		}
	}
	if got := ReadPIDFile(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("ReadPIDFile(missing) = %d", got)
	}
}

func TestTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	for _, tc := range []struct {
		content string
		n       int
		want    string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"", 3, "(empty)"},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := Tail(path, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.content, tc.n, got, tc.want)
		}
	}
	if got := Tail(filepath.Join(dir, "missing"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("Tail(missing) = %q", got)
	}
}

func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	release, err := LockFile(path, syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockFile(path, syscall.LOCK_SH|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("second lock while held: %v, want EWOULDBLOCK", err)
	}
	release()
	release2, err := LockFile(path, syscall.LOCK_SH|syscall.LOCK_NB)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}

func TestStartError(t *testing.T) {
	_, err := Start(Options{Name: "missing", Path: filepath.Join(t.TempDir(), "no-such-binary"), Log: filepath.Join(t.TempDir(), "log")})
	if err == nil || !strings.HasPrefix(err.Error(), "start missing: ") {
		t.Fatalf("Start = %v, want start missing: ...", err)
	}
}

func waitLog(t *testing.T, p *Proc, s string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.Log(), s); {
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("%s never logged %q (exited %v): %s", p.Name, s, p.Exited(), p.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
