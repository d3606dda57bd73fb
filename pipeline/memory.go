package pipeline

import (
	"os"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/residency"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/tracing"
)

// SetMemoryLimit gives the Go runtime a soft memory limit of what the
// in-flight bounds allow plus headroom (cfg.MemoryLimit), unless GOMEMLIMIT
// sets one. Without it the heap may grow to twice what is live before a
// collection, so a full in-flight window would cost twice its size.
func SetMemoryLimit(cfg Config, log *zap.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := cfg.MemoryLimit()
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", zap.Int64("bytes", limit))
}

// MemoryLimit is the Go memory a relay of cfg needs: what
// Sink.MaxInflightBytes and the replication buffer bound, plus headroom.
func (c Config) MemoryLimit() int64 {
	inflight := c.Sink.MaxInflightBytes
	if inflight == 0 {
		inflight = sink.DefaultMaxInflightBytes
	}
	return int64(inflight) + replication.BufferBytes + memoryHeadroom + c.spanBytes()
}

// spanBytes is what exporting spans holds (tracing.MemoryBytes), when the
// relay reads trace contexts and OTEL_* configures export.
func (c Config) spanBytes() int64 {
	if c.Decode.TraceContextColumn == "-" {
		return 0
	}
	return tracing.MemoryBytes(os.Getenv)
}

// memoryHeadroom is the Go memory walrelay needs besides what
// --max-inflight-bytes and the replication buffer bound: the transaction
// part being produced (1 MiB), the produce request being written, clients,
// metrics, stacks, and room for the collector.
//
// N.B. the in-flight bytes count what records really hold (decode copies
// their bytes out of the replication message), so the live heap stays
// under this limit and the collector does not run back to back: with
// --max-inflight-bytes 4 MiB and Kafka throttled it ran as often as
// without a limit (TestMemoryBoundPerRowShape, GOMEMLIMIT=off to compare).
// Before, a record pointing into a 50 KB row held 50 KB for 1.4 KiB
// counted, the heap outgrew the limit and collections took 40-80% of the
// CPU.
const memoryHeadroom = 16 << 20

// trimStartPages drops the executable's pages that only start-up used from
// the resident set (package residency), once per process, the first time a
// pipeline holds its slot (replication.Stream.OnHeld), before it reads from
// it: every package's initialisation and the pipeline's start-up have run
// by then. Later calls return at once.
func (r *Relay) trimStartPages() {
	before, after, ok, err := residency.TrimOnce()
	switch {
	case err != nil:
		r.log.Debug("start-up pages of the executable kept resident", zap.Error(err))
	case ok:
		r.log.Info("start-up pages of the executable dropped from the resident set (they stay in the page cache)",
			zap.Int64("rss_file_before_bytes", before), zap.Int64("rss_file_after_bytes", after))
	}
}
