package sink

import (
	"context"
	"time"
)

// lingerWorth is how many transaction parts must be produced per linger
// for the records to wait for it (Send): the rate above which batching
// saves produce requests. With a 5 ms linger, 2,000 a second, measured
// over rate.MinWindow.
const lingerWorth = 10

// Send says that the relay has handed over every transaction it has read.
// Unless transactions come fast enough for a linger (Config.Linger) to
// gather lingerWorth of them, the records produced go now rather than after
// their linger: a linger then batches a busy stream, where it saves produce
// requests and CPU, and delays no record of a quiet one. Called from the
// producing goroutine.
//
// N.B. measured on 2 cores with PostgreSQL and the broker on the same box:
// a plain 5 ms linger at 1,000 single-row transactions a second raised p50
// from 2 ms to 6 ms; at 5,000 a second it cut p99 from 0.7-0.9 s to
// 0.15-0.19 s, the broker's CPU for unbatched requests having saturated the
// box (bench/results/2026-12-01-203951-vm-linger0.md and the three after).
func (s *Sink) Send() {
	if !s.lingering || s.cfg.Linger <= 0 || s.deps.Null || s.rate.Busy(time.Now()) {
		return
	}
	s.lingering = false
	// N.B. franz-go ends every partition's linger in Flush before it
	// waits, and a context that is done returns at once.
	_ = s.cl.Flush(doneCtx)
}

// doneCtx is a context that is already done.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// sendLingering sends at once the records that wait for their linger
// (Config.Linger) to end, and those produced after them until all are
// acknowledged: the sink calls it before each wait for an acknowledgement,
// which its own lingering records would otherwise prolong by up to the
// linger each time. Called from the producing goroutine.
//
// N.B. it flushes in the background rather than ending the lingers once: a
// record of a topic whose partitions the client has not loaded yet (as
// after a restart) starts its linger only once they are loaded, after any
// call that ends the lingers, and franz-go starts no linger while a Flush
// runs. The flush ends by itself once every record is acknowledged (or
// failed, as when the client is closed).
func (s *Sink) sendLingering() {
	if !s.lingering || s.cfg.Linger <= 0 || s.deps.Null {
		return
	}
	s.lingering = false
	if s.flushDone != nil {
		select {
		case <-s.flushDone:
		default:
			return // still flushing: nothing lingers
		}
	}
	done := make(chan struct{})
	s.flushDone = done
	go func() {
		defer close(done)
		if s.sh != nil {
			_ = s.flushOwn(context.Background()) // shared.go: not the others' records
			return
		}
		_ = s.cl.Flush(context.Background())
	}()
}
