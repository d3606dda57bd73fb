package harness

import (
	"encoding/binary"
	"time"
)

// armedDelay is DelayAll's: every message match selects goes d late.
type armedDelay struct {
	match Matcher
	d     time.Duration
}

// DelayAll forwards every message m selects d late, on every connection,
// and what follows it in its direction with it, until stop is called (at
// cleanup at the latest): e.g. a broker slow to answer metadata requests,
// which it answers in order on a connection, behind each other.
func (p *Proxy) DelayAll(m Matcher, d time.Duration) (stop func()) {
	a := &armedDelay{match: m, d: d}
	p.mu.Lock()
	p.delay = a
	p.mu.Unlock()
	stop = func() {
		p.mu.Lock()
		if p.delay == a {
			p.delay = nil
		}
		p.mu.Unlock()
	}
	p.t.Cleanup(stop)
	return stop
}

// KafkaMetadata selects a metadata request: what franz-go's Ping sends,
// and what the client sends to learn the brokers, topics and leaders.
func KafkaMetadata(dir Dir, msg []byte) bool {
	return dir == ToServer && len(msg) >= 6 && binary.BigEndian.Uint16(msg[4:]) == 3
}
