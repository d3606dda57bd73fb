package replication

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpInfo is the kernel's TCP_INFO of the socket.
func (c *coalescingConn) tcpInfo() (*unix.TCPInfo, error) {
	if c.raw == nil {
		return nil, errors.ErrUnsupported
	}
	var info *unix.TCPInfo
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil {
		return nil, cerr
	}
	return info, err
}

// minRTT is the connection's minimum round trip as the kernel measured it.
func (c *coalescingConn) minRTT() (time.Duration, error) {
	info, err := c.tcpInfo()
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
	info, err := c.tcpInfo()
	if err != nil {
		return 0, 0
	}
	return int(info.Rcv_ssthresh), int(info.Rcv_mss)
}

// setRcvBuf sets the socket's SO_RCVBUF.
func (c *coalescingConn) setRcvBuf(n int) error { return c.setSocketInt(syscall.SO_RCVBUF, n) }
