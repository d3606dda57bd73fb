package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The functions below act on a process by pid, for a server another process
// started (a kept bed's, recorded in a pid file). marker is a string of its
// command line (a config file's path), which guards against a recycled pid.

// ReadPIDFile returns the pid on the first line of a pid file (Kafka's of
// the bed, PostgreSQL's postmaster.pid); 0 when there is none.
func ReadPIDFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// Alive reports whether pid is a live (not zombie) process whose command
// line contains marker.
func Alive(pid int, marker string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may hold spaces.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte(marker))
}

// WaitGone waits until Alive(pid, marker) is false; it reports whether that
// happened within timeout.
func WaitGone(pid int, marker string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for Alive(pid, marker) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// StopPID sends SIGTERM (a clean shutdown) and SIGKILL if the process has
// not exited after grace, then waits up to 10 s. A process that is not
// running is not an error.
func StopPID(pid int, marker string, grace time.Duration) error {
	if !Alive(pid, marker) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal pid %d: %w", pid, err)
	}
	if WaitGone(pid, marker, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if WaitGone(pid, marker, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("pid %d still running after SIGKILL", pid)
}

// KillPID sends SIGKILL and waits up to 10 s until the process is gone; it
// is an error when it is not running.
func KillPID(pid int, marker string) error {
	if !Alive(pid, marker) {
		return errors.New("it is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	if !WaitGone(pid, marker, 10*time.Second) {
		return fmt.Errorf("pid %d still running 10s after SIGKILL", pid)
	}
	return nil
}
