package replication

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// minRTT is the connection's minimum round trip as the kernel measured it.
func (c *coalescingConn) minRTT() (time.Duration, error) {
	if c.raw == nil {
		return 0, errors.ErrUnsupported
	}
	var info *unix.TCPInfo
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, err
	}
	if info.Min_rtt == 0 {
		// N.B. not measured yet (or a kernel without it): the smoothed one.
		return time.Duration(info.Rtt) * time.Microsecond, nil
	}
	return time.Duration(info.Min_rtt) * time.Microsecond, nil
}

// rcvWindow is the largest window the socket announces now (rcv_ssthresh)
// and the segment size it sees (rcv_mss); 0 when the kernel does not say.
func (c *coalescingConn) rcvWindow() (window, mss int) {
	if c.raw == nil {
		return 0, 0
	}
	var info *unix.TCPInfo
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		return 0, 0
	}
	return int(info.Rcv_ssthresh), int(info.Rcv_mss)
}

// setRcvBuf sets the socket's SO_RCVBUF.
func (c *coalescingConn) setRcvBuf(n int) error {
	if c.raw == nil {
		return errors.ErrUnsupported
	}
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
	}); cerr != nil {
		return cerr
	}
	return err
}
