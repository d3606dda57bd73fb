package replication

import (
	"errors"
	"fmt"
)

// ErrSetup is wrapped by errors that a person must fix in PostgreSQL's
// setup or walrelay's flags; retrying does not help.
var ErrSetup = errors.New("setup")

// ErrSlotLost is wrapped when the slot was invalidated (wal_status lost):
// the WAL it needed is gone and events may have been lost.
var ErrSlotLost = errors.New("replication slot lost")

// ErrSlotInUse is wrapped when another process streams the slot.
var ErrSlotInUse = errors.New("replication slot in use")

// ErrSlotNotReady is wrapped when the slot exists but another session is
// still creating it (no confirmed_flush_lsn yet): wait and try again.
var ErrSlotNotReady = errors.New("replication slot not ready")

// ErrSlotRecovering is wrapped when another walrelay is recovering the slot
// from the outbox table now (its session holds the recovery's lock): the
// slot must not be streamed from, nor recovered again, until it finishes.
var ErrSlotRecovering = errors.New("replication slot being recovered")

// ErrRecoveryUnfinished is wrapped by History's errors for a slot whose
// record says a recovery of it began and did not finish.
var ErrRecoveryUnfinished = errors.New("recovery unfinished")

// ErrSlotGone is wrapped (with ErrSlotLost) when a slot walrelay streamed
// from no longer exists.
var ErrSlotGone = errors.New("replication slot gone")

type slotGoneError struct{ msg string }

func (e *slotGoneError) Error() string { return e.msg }

func (e *slotGoneError) Is(target error) bool {
	return target == ErrSlotGone || target == ErrSlotLost
}

// setupError is a problem a person must fix: it wraps ErrSetup.
type setupError struct{ msg string }

func (e *setupError) Error() string        { return e.msg }
func (e *setupError) Is(target error) bool { return target == ErrSetup }

func setupErrorf(format string, args ...any) error {
	return &setupError{msg: fmt.Sprintf(format, args...)}
}
