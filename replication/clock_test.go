package replication

import (
	"testing"
	"time"
)

// later spins until the clock has moved past t, so that a new reading can
// be told from t.
func later(t time.Time) {
	for !time.Now().After(t) {
	}
}

func TestClockSharedBetweenSocketReads(t *testing.T) {
	ss := &session{reader: &coalescingConn{}}
	first := ss.clock()
	if first.IsZero() {
		t.Fatal("the first reading is zero")
	}
	// Messages taken from memory share the reading, up to clockReuse.
	for i := 0; i < clockReuse; i++ {
		later(first)
		if got := ss.clock(); !got.Equal(first) {
			t.Fatalf("message %d from memory: clock read again (%v after %v)", i+1, got.Sub(first), first)
		}
	}
	later(first)
	second := ss.clock()
	if !second.After(first) {
		t.Fatalf("after %d messages sharing one reading: not read again", clockReuse)
	}

	// A read of the socket reads the clock again, as the loop does.
	reads := ss.socketReads()
	ss.reader.reads.Add(1)
	later(second)
	if ss.socketReads() != reads {
		ss.tick()
	}
	third := ss.clock()
	if !third.After(second) {
		t.Fatal("after a read of the socket: the reading before it is used")
	}

	// Whatever may have blocked marks it stale.
	later(third)
	ss.stale = true
	if got := ss.clock(); !got.After(third) {
		t.Fatal("stale reading used")
	}
}

func TestClockWithoutReaderReadsPerMessage(t *testing.T) {
	ss := &session{}
	prev := ss.clock()
	for i := 0; i < 3; i++ {
		ss.socketReads()
		later(prev)
		got := ss.clock()
		if !got.After(prev) {
			t.Fatalf("message %d without a reader: clock not read again", i+1)
		}
		prev = got
	}
}
