//go:build !unix

package replication

import "errors"

func (c *coalescingConn) setLowat(int) error { return errors.ErrUnsupported }
