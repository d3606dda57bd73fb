package pipeline

import (
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
)

// commitSamples is how many (end LSN, commit time) samples commitTimes
// keeps, one a second at most: the confirmed position may lag the newest
// by that long and still find one at or before it.
const commitSamples = 16

// commitTimes remembers the commit times of transactions handed to the
// sink, so that the slot's marker can record the commit time of one at or
// before the confirmed position (kafkastate.Marker.ConfirmedCommitTime):
// recovery selects the outbox rows committed after it. The decoding
// goroutine observes, the marker goroutine asks.
type commitTimes struct {
	mu      sync.Mutex
	samples [commitSamples]commitSample
	next    int
	settled commitSample // the newest sample found at or before a confirmed position
}

type commitSample struct {
	end pglogrepl.LSN
	at  time.Time
}

// observe records a transaction's end and commit time, at most once a
// second.
func (c *commitTimes) observe(end pglogrepl.LSN, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.samples[(c.next+commitSamples-1)%commitSamples]
	if !last.at.IsZero() && at.Sub(last.at) < time.Second && end > last.end {
		return
	}
	c.samples[c.next] = commitSample{end: end, at: at}
	c.next = (c.next + 1) % commitSamples
}

// before returns the commit time of the newest sampled transaction that
// ends at or before confirmed; zero when none is known.
//
// N.B. commit times follow commit order (to the clock's precision, which
// the recovery margin covers): every transaction after confirmed committed
// at or after the time returned, so a recovery starting there misses none.
func (c *commitTimes) before(confirmed pglogrepl.LSN) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.samples {
		if !s.at.IsZero() && s.end <= confirmed && s.end > c.settled.end {
			c.settled = s
		}
	}
	if c.settled.end > confirmed {
		return time.Time{}
	}
	return c.settled.at
}
