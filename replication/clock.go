package replication

import "time"

// clockReuse is how many consecutive messages taken from memory may share
// one reading of the clock.
const clockReuse = 64

// clock returns the receive loop's current time: the reading taken after
// the last read of the socket, while the messages handled since came from
// memory (at most clockReuse of them), else a new reading. Without a
// reader (socketReads) every message counts as read from the socket.
//
// N.B. a reading costs about 25 ns here (the vDSO's clock_gettime, twice
// for time.Now, in a VM): at two readings per message, 12 per single-row
// transaction, they were about a tenth of walrelay's CPU in a drain
// (perf: __vdso_clock_gettime 9.5 % of walrelay's samples, with the sink's
// per-transaction readings). A drain reads hundreds of messages per read of
// the socket, handled in microseconds, so they share the time that read
// returned; a live stream reads each message on its own and reads the clock
// for each, as before. Whatever may block the loop (a handoff that waits
// for room downstream, a status update written) marks the reading stale.
func (ss *session) clock() time.Time {
	if ss.reader == nil || ss.stale || ss.reuses >= clockReuse || ss.now.IsZero() {
		ss.tick()
	} else {
		ss.reuses++
	}
	return ss.now
}

// tick reads the clock.
func (ss *session) tick() {
	ss.now, ss.stale, ss.reuses = time.Now(), false, 0
}

// socketReads is how many reads of the socket the connection's reader made
// (0 without one): the clock is read again after a message whose receipt
// changed it.
func (ss *session) socketReads() uint64 {
	if ss.reader == nil {
		return 0
	}
	return ss.reader.reads.Load()
}
