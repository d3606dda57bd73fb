package httpserve

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit is a listener that keeps at most max connections open. At the
// limit, accepting one more first closes the connection that has waited
// longest without a request in progress: idle between requests, or still
// sending its request's headers (a slow client). A connection serving a
// request is never closed; when all are, the new one is.
type connLimit struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[net.Conn]connInfo
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, max: max, conns: make(map[net.Conn]connInfo)}
}

// Accept returns the next connection, making room for it.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.conns) >= l.max {
			victim := l.waitingLongest()
			if victim == nil {
				l.mu.Unlock()
				c.Close()
				continue
			}
			// N.B. forgotten now, not when the server reports it closed:
			// its file descriptor is released at Close.
			delete(l.conns, victim)
			victim.Close()
		}
		l.conns[c] = connInfo{state: http.StateNew, since: time.Now()}
		l.mu.Unlock()
		return c, nil
	}
}

// waitingLongest is the idle connection idle the longest, else the new
// connection open the longest (no request read yet), else nil. Called
// with l.mu held.
func (l *connLimit) waitingLongest() net.Conn {
	var best net.Conn
	var bestInfo connInfo
	for c, ci := range l.conns {
		if ci.state != http.StateIdle && ci.state != http.StateNew {
			continue
		}
		better := best == nil ||
			ci.state == http.StateIdle && bestInfo.state == http.StateNew ||
			ci.state == bestInfo.state && ci.since.Before(bestInfo.since)
		if better {
			best, bestInfo = c, ci
		}
	}
	return best
}

// track is the server's ConnState hook.
func (l *connLimit) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	default:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{state: state, since: time.Now()}
		}
	}
}
