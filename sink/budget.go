package sink

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// RecordOverhead is what one buffered record costs in memory beyond its key,
// value and headers: the record and its bookkeeping in the client, the
// decoded event and the replication message its fields point into. It is
// counted against MaxInflightBytes with every record, so that the limit
// bounds memory and not only payload bytes.
//
// N.B. measured for the outbox rows of the benchmark (~310-byte payloads):
// about 1.2 KiB of heap per buffered record against ~380 bytes of key,
// value and headers.
const RecordOverhead = 1024

// recordCost is what r counts against MaxInflightBytes.
func recordCost(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value) + RecordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}
