package pgcatalog

import (
	"fmt"

	"github.com/walrelay/walrelay/replication"
)

// The sentinels the errors of this package wrap are replication's
// (ErrSetup, ErrSlotLost, ErrSlotInUse, ErrSlotNotReady, ErrSlotGone): the
// stream raises the same ones, and the pipeline and main classify both by
// them (exit codes 2 and 3).

// setupError is a problem a person must fix: it wraps replication.ErrSetup.
type setupError struct{ msg string }

func (e *setupError) Error() string        { return e.msg }
func (e *setupError) Is(target error) bool { return target == replication.ErrSetup }

func setupErrorf(format string, args ...any) error {
	return &setupError{msg: fmt.Sprintf(format, args...)}
}

// slotGoneError is a slot walrelay streamed from that no longer exists: it
// wraps replication.ErrSlotGone and replication.ErrSlotLost.
type slotGoneError struct{ msg string }

func (e *slotGoneError) Error() string { return e.msg }
func (e *slotGoneError) Is(target error) bool {
	return target == replication.ErrSlotGone || target == replication.ErrSlotLost
}
