package pipeline

import (
	"errors"
	"fmt"
	"sync"

	"github.com/walrelay/walrelay/decode"
)

// An outbox table that no longer matches the column mapping (a mapped
// column renamed, dropped or retyped while streaming: decode's
// ErrSchemaChanged, at the Relation message that shows it) is a
// configuration change, handled like a publication changed under walrelay:
// walrelay stops with exit 2 and the flag to set. It stops as on SIGTERM:
// the stream finishes the transaction being received and ends, the decode
// loop drops everything from the failing message on, waits for Kafka's
// acknowledgement of what it handed on before it and sends the final status
// update. So every transaction before the one carrying the change is
// confirmed (after a restart with the new flag, the first transaction
// decoded is the one that shows the new columns), and nothing from it on.
//
// N.B. a rename is told from the column's place in the previous Relation
// message; the rows before the change are relayed under the old mapping.

// schemaStop turns a schema change into a graceful stop of one attempt.
type schemaStop struct {
	stop chan struct{} // closed: the stream stops as on SIGTERM
	once sync.Once
	err  error // the change, wrapping ErrColumns; the decode loop's alone
}

// newSchemaStop returns a schemaStop whose stop channel is also closed when
// parent (the relay's own stop; nil: never) is, until done.
func newSchemaStop(parent <-chan struct{}, done <-chan struct{}) *schemaStop {
	s := &schemaStop{stop: make(chan struct{})}
	go func() {
		select {
		case <-parent:
			s.once.Do(func() { close(s.stop) })
		case <-done:
		}
	}()
	return s
}

// halt stops the attempt for err, a decode error; it reports whether err
// is a schema change (otherwise the caller fails as before). Called by
// the decode loop only.
func (s *schemaStop) halt(err error) bool {
	if !errors.Is(err, decode.ErrSchemaChanged) {
		return false
	}
	if s.err == nil {
		s.err = fmt.Errorf("%w: %w", ErrColumns, err)
	}
	s.once.Do(func() { close(s.stop) })
	return true
}
