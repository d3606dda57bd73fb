package testbed

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
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

// credential makes a child run as u (supplementary groups dropped); nil for
// the current user.
func (u osUser) credential() *syscall.Credential {
	if !u.isSet() {
		return nil
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid}
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}
