package testbed

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// osUser is the OS user a child process runs as; the zero value is the
// current user.
type osUser struct {
	name     string
	uid, gid uint32
}

func (u osUser) isSet() bool { return u.name != "" }

// postgresUser returns the user PostgreSQL runs as: the current one, or the
// postgres OS user when running as root (initdb and postgres refuse root).
func postgresUser() (osUser, error) {
	if os.Geteuid() != 0 {
		return osUser{}, nil
	}
	return lookupUser("postgres")
}

func lookupUser(name string) (osUser, error) {
	if name == "" {
		return osUser{}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return osUser{}, fmt.Errorf("PostgreSQL refuses to run as root and the %q OS user is missing (%v): apt-get install -y postgresql creates it", name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return osUser{}, fmt.Errorf("parse uid of %s: %w", name, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return osUser{}, fmt.Errorf("parse gid of %s: %w", name, err)
	}
	return osUser{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

// apply makes a child started with attr run as u (supplementary groups dropped).
func (u osUser) apply(attr *syscall.SysProcAttr) {
	if u.isSet() {
		attr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
	}
}

func (u osUser) chown(paths ...string) error {
	if !u.isSet() {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(u.uid), int(u.gid)); err != nil {
			return fmt.Errorf("chown %s to %s: %w", p, u.name, err)
		}
	}
	return nil
}

// procAttr returns the attributes of a server process. A detached server gets
// a session of its own and outlives its starter (a bed owned by the testbed
// command, or restarted by a test binary that does not own the bed). Otherwise
// it gets its own process group (a terminal's ^C reaches the starter, which
// stops the servers in order) and deathSig when the starter dies, so a test
// binary killed by -timeout leaves no server behind.
func procAttr(detached bool, deathSig syscall.Signal) *syscall.SysProcAttr {
	if detached {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
}

// alive reports whether pid is a live (not zombie) process whose command line
// contains marker, which guards against a recycled pid.
func alive(pid int, marker string) bool {
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

// waitGone waits until alive(pid, marker) is false; it reports whether that
// happened within timeout.
func waitGone(pid int, marker string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for alive(pid, marker) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// tail returns the last n lines of the file at path, or a note saying why it
// cannot.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const maxRead = 256 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > maxRead {
		if _, err := f.Seek(fi.Size()-maxRead, io.SeekStart); err != nil {
			return fmt.Sprintf("(%v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(empty)"
	}
	return strings.Join(lines, "\n")
}

// lockFile takes an flock (syscall.LOCK_SH or LOCK_EX, optionally |LOCK_NB)
// on path, creating the file. The lock lasts until release is called or the
// process exits.
func lockFile(path string, how int) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeFileAtomic replaces path with data so that readers see the old or the
// new content, never a torn one.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}
