package pipeline

import (
	"time"

	"go.uber.org/zap"
)

// closeSlowAfter is how long a client may take to close before the stop
// says what it waits for; once the shutdown timeout has passed, it is how
// long the stop still waits for it.
const closeSlowAfter = time.Second

// stopLeft is what is left of the shutdown timeout, and whether the relay
// is stopping.
func (r *Relay) stopLeft() (time.Duration, bool) {
	ns := r.stopBy.Load()
	if ns == 0 {
		return 0, false
	}
	return time.Until(time.Unix(0, ns)), true
}

// closeOrAbort runs closeFn, a client's Close, and returns when it has
// returned; when stopping, at the end of the shutdown timeout and
// closeSlowAfter more; or when the relay aborts. A close that takes longer
// than closeSlowAfter is logged, with what it waits for.
//
// N.B. a franz-go client's Close may wait on Kafka (an exactly-once
// producer aborts its open transaction first, up to 5 s): a stop whose
// time is up exits without it; records it held were not acknowledged, so
// not confirmed, and are sent again on restart.
func (r *Relay) closeOrAbort(what string, closeFn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		closeFn()
	}()
	slow := time.NewTimer(closeSlowAfter)
	defer slow.Stop()
	var late <-chan time.Time
	if left, stopping := r.stopLeft(); stopping {
		t := time.NewTimer(max(left, 0) + closeSlowAfter)
		defer t.Stop()
		late = t.C
	}
	for {
		select {
		case <-done:
			return
		case <-slow.C:
			r.log.Info("stopping: waiting for the "+what+" to close", zap.Duration("waited", closeSlowAfter))
		case <-late:
			r.log.Warn("stopping: the shutdown timeout has passed: not waiting for the " + what + " to close")
			return
		case <-r.abort:
			r.log.Warn("aborting: not waiting for the " + what + " to close")
			return
		}
	}
}
