package pipeline

import (
	"errors"
	"fmt"
	"testing"

	"github.com/walrelay/walrelay/decode"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestSchemaStop: a schema change stops the stream and becomes a setup
// error (exit 2); another decode error does not; a SIGTERM before it does
// not hide it.
func TestSchemaStop(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	s := newSchemaStop(nil, done)
	if s.halt(errors.New("protocol out of sync")) || closed(s.stop) || s.err != nil {
		t.Fatal("a decode error that is no schema change halted the stream")
	}
	change := fmt.Errorf("decode message at 0/1: %w", decode.ErrSchemaChanged)
	if !s.halt(change) || !closed(s.stop) {
		t.Fatal("a schema change did not stop the stream")
	}
	if !errors.Is(s.err, ErrColumns) || !errors.Is(s.err, decode.ErrSchemaChanged) || !IsSetupError(s.err) {
		t.Errorf("err %v: want a setup error wrapping ErrColumns and decode.ErrSchemaChanged", s.err)
	}

	parent := make(chan struct{})
	s = newSchemaStop(parent, done)
	close(parent)
	<-s.stop
	if !s.halt(change) || s.err == nil {
		t.Errorf("a schema change after SIGTERM: err %v, want it kept", s.err)
	}
}
