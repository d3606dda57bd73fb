package testbed

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/proc"
)

// TestReapStaleLeavesLiveBeds: the reaper another make run starts with
// removes only beds whose owner is gone, and never creates a file in a
// bed being created or removed (a make test failed at its very end,
// "testbed: stop: unlinkat /tmp/walrelay-bed-…: directory not empty", the
// directory holding only an owner.lock the reaper of a make matrix
// started beside it had created).
func TestReapStaleLeavesLiveBeds(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(name string) string {
		dir := filepath.Join(tmp, "walrelay-bed-"+name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// Being removed by its owner: the owner lock already unlinked.
	removing := mk("removing")
	// Alive: its owner holds the lock.
	alive := mk("alive")
	release, err := proc.LockFile(filepath.Join(alive, ownerLockName), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// Stale: a lock nobody holds, no state, last changed an hour ago.
	stale := mk("stale")
	if err := os.WriteFile(filepath.Join(stale, ownerLockName), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}

	reapStale(t.Logf)

	if left, _ := filepath.Glob(filepath.Join(removing, "*")); len(left) != 0 {
		t.Errorf("the reaper left %v in a bed being removed: its owner's RemoveAll fails", left)
	}
	if _, err := os.Stat(filepath.Join(alive, ownerLockName)); err != nil {
		t.Errorf("a live bed lost its owner lock: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stale bed was not removed (stat: %v)", err)
	}
}
