package pipeline

import (
	"time"

	"go.uber.org/zap"
)

// closeSlowAfter is how long a client may take to close before the stop
// says what it waits for.
const closeSlowAfter = time.Second

// closeOrAbort runs closeFn, a client's Close, and returns when it has
// returned or when the relay aborts, whichever comes first. A close that
// takes longer than closeSlowAfter is logged, with what it waits for.
//
// N.B. a franz-go client's Close may wait on Kafka (an exactly-once
// producer aborts its open transaction first): after an abort the process
// exits without it; the records it held are sent again on restart.
func (r *Relay) closeOrAbort(what string, closeFn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		closeFn()
	}()
	slow := time.NewTimer(closeSlowAfter)
	defer slow.Stop()
	for {
		select {
		case <-done:
			return
		case <-slow.C:
			r.log.Info("stopping: waiting for the "+what+" to close", zap.Duration("waited", closeSlowAfter))
		case <-r.abort:
			r.log.Warn("aborting: not waiting for the " + what + " to close")
			return
		}
	}
}
