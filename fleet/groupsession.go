package fleet

import (
	"fmt"
	"time"
)

// keyGroupSession is the file's group-session-timeout: setting (not a
// flag): how long the group waits for a replica that stops heartbeating
// before it gives that replica's pipelines to the others.
const keyGroupSession = "group-session-timeout"

// The group's liveness by default: a replica killed is taken out of the
// group, and its pipelines assigned to the others, after 10 s.
const defaultGroupSession = 10 * time.Second

// The session timeouts a Kafka broker accepts by default
// (group.min.session.timeout.ms, group.max.session.timeout.ms).
const (
	minGroupSession = 6 * time.Second
	maxGroupSession = 30 * time.Minute
)

// groupSession is the group session timeout of file f: its
// group-session-timeout:, else defaultGroupSession. A mistake says what
// is wrong with the setting, with the fix; the duration is then the
// default.
func groupSession(f file) (time.Duration, *mistake) {
	e, ok := f.top.lookup(keyGroupSession)
	if !ok {
		return defaultGroupSession, nil
	}
	if _, grouped := f.top.lookup(keyGroup); !grouped {
		return defaultGroupSession, &mistake{line: e.line, msg: keyGroupSession + ": is the session of a group's replicas: set group: NAME too, or remove it"}
	}
	d, err := time.ParseDuration(e.value)
	if err != nil || d < minGroupSession || d > maxGroupSession {
		return defaultGroupSession, &mistake{line: e.line, msg: fmt.Sprintf("%s: %q: want a duration from %s to %s (Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms by default), e.g. 30s; the default is %s",
			keyGroupSession, e.value, minGroupSession, maxGroupSession, defaultGroupSession)}
	}
	return d, nil
}

// heartbeatOf is the heartbeat interval for a group session of d: a tenth
// of it (Kafka's consumers default to a third), so that a replica misses
// several before its session ends.
func heartbeatOf(d time.Duration) time.Duration { return d / 10 }
