package sink

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// RecordOverhead is what one buffered record costs in memory beyond its key,
// value and headers: the record and its bookkeeping in the client and the
// producing goroutine. It is counted against MaxInflightBytes with every
// record, so that the limit bounds memory and not only payload bytes.
//
// N.B. measured for the outbox rows of the benchmark (~310-byte payloads):
// about 1.2 KiB of heap per buffered record against ~380 bytes of key,
// value and headers, when the record still pointed into its replication
// message; decode now copies the record's bytes out of it.
const RecordOverhead = 1024

// recordCost is what r counts against MaxInflightBytes.
//
// N.B. capacities, not lengths: decode gives the allocator's slack of an
// event's bytes to its last slice, so the sum is what the record holds.
func recordCost(r *kgo.Record) int64 {
	n := cap(r.Key) + cap(r.Value) + RecordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + cap(h.Value)
	}
	return int64(n)
}
