package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Tail returns the last n lines of the file at path (a log), or a note
// saying why it cannot.
func Tail(path string, n int) string {
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

// LockFile takes an flock (syscall.LOCK_SH or LOCK_EX, optionally
// |LOCK_NB) on path, creating the file: how processes share a bed or a
// download. The lock lasts until release is called or the process exits.
func LockFile(path string, how int) (release func(), err error) {
	return lockFile(path, os.O_RDWR|os.O_CREATE, how)
}

// LockExistingFile is LockFile on a file that must exist already (an error
// satisfying os.IsNotExist otherwise): a process that only checks another's
// lock must not create it again in a directory being removed.
func LockExistingFile(path string, how int) (release func(), err error) {
	return lockFile(path, os.O_RDWR, how)
}

func lockFile(path string, flag, how int) (release func(), err error) {
	f, err := os.OpenFile(path, flag, 0o666)
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

// WriteFileAtomic replaces path with data so that readers (another process)
// see the old or the new content, never a torn one.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
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
