//go:build !linux

package replication

import (
	"errors"
	"time"
)

// N.B. the drain window is measured on Linux only: elsewhere the kernel's
// buffer is kept.

func (c *coalescingConn) minRTT() (time.Duration, error) { return 0, errors.ErrUnsupported }

func (c *coalescingConn) rcvWindow() (window, mss int) { return 0, 0 }

func (c *coalescingConn) setRcvBuf(int) error { return errors.ErrUnsupported }
