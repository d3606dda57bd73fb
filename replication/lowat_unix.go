//go:build unix

package replication

import "syscall"

// setLowat sets the socket's SO_RCVLOWAT.
func (c *coalescingConn) setLowat(n int) error { return c.setSocketInt(syscall.SO_RCVLOWAT, n) }

// setSocketInt sets the socket option opt (level SOL_SOCKET) to n.
func (c *coalescingConn) setSocketInt(opt, n int) error {
	if c.raw == nil {
		return syscall.ENOTSUP
	}
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, n)
	}); cerr != nil {
		return cerr
	}
	return err
}
