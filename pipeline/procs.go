package pipeline

import (
	"runtime"

	"go.uber.org/zap"
)

// SetProcs runs one pipeline's goroutines on one processor
// (runtime.GOMAXPROCS(1)) unless GOMAXPROCS sets how many (getenv is
// os.Getenv). Returns the number in effect.
//
// N.B. why (docs/performance.md, "One processor for one pipeline"): a
// pipeline is a chain of goroutines, each waking the next (the socket
// reader, the decoder, the sink, franz-go's writer, reader and promises,
// the acknowledgement). With a processor per core, every wake-up of a
// goroutine on an idle runtime wakes another thread, which spins looking
// for work before it sleeps again: at 1,000 single-row transactions a
// second that was a quarter of walrelay's CPU, on cores it shares with
// PostgreSQL and the broker. One processor runs the chain on one thread,
// and it keeps up with any walsender: a walsender spends 8-23 CPU s per
// million single-row transactions, a pipeline 5-8, and the walsender is
// one process on one core. A process of many pipelines (walrelay run
// --config) keeps the runtime's default.
func SetProcs(getenv func(string) string, log *zap.Logger) int {
	if getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	if prev := runtime.GOMAXPROCS(1); prev != 1 {
		log.Debug("one processor for the pipeline", zap.Int("default_was", prev))
	}
	return 1
}
