package decode

import (
	"time"
	"unsafe"

	"github.com/jackc/pglogrepl"
)

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Field is one column of a row, kept for events that cannot be mapped.
type Field struct {
	Name  string
	Type  uint32 // type OID
	Null  bool
	Value []byte // text form as PostgreSQL sent it
}

// Event is one outbox row, mapped to a Kafka record.
//
// N.B. an event owns its bytes: Key, Value, ID and the header values are
// copied out of the pgoutput message into one allocation (a poison event's
// Row values into another), so that the message is garbage once decoded
// and columns nobody maps (a wide jsonb, a bytea's hex text) are never held
// while the record waits for Kafka. The capacities of those slices add up
// to the allocation, so that counting them counts what is held.
type Event struct {
	Table   string // schema-qualified source table
	Topic   string
	Key     []byte
	Value   []byte // nil for a NULL payload
	ID      []byte
	Headers []Header // extra headers, after "id"
	// TraceContext is the row's trace-context column as written (nil:
	// none), for package tracing (Config.TraceContextColumn).
	TraceContext []byte
	// Partition is the record's partition when HasPartition
	// (Config.PartitionColumn); otherwise the key hash picks it.
	Partition    int32
	HasPartition bool
	// Timestamp is the record's timestamp when not zero
	// (Config.TimestampColumn); otherwise the commit time.
	Timestamp time.Time
	// Err is set when the row cannot become a record (it wraps one of the
	// Err* reasons above); Row then holds the row as received, except a
	// column dropped for its size (DroppedColumn, DroppedBytes). Key and ID
	// are set if they were read before the error; Value and Headers are
	// nil.
	Err error
	// Reason is set with Err: the class of Err (Reason(Err)) that the
	// dead-letter record's walrelay.error.class header and the dead-letter
	// metric name.
	Reason        string
	Row           []Field
	DroppedColumn string
	DroppedBytes  int
}

// Size is the record bytes the event puts in flight.
func (e *Event) Size() int {
	n := len(e.Topic) + len(e.Key) + len(e.Value) + len(e.ID) + 2
	for _, h := range e.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Sizes of what an event holds besides its bytes.
const (
	eventBytes  = int(unsafe.Sizeof(Event{}))
	headerBytes = int(unsafe.Sizeof(Header{}))
	fieldBytes  = int(unsafe.Sizeof(Field{}))
)

// Held is the memory the event holds until it is produced: the Event
// itself, its headers and row, and the bytes it owns (their capacities).
// Topic, Table, header keys and field names are shared with the relation
// cache and are not counted.
func (e *Event) Held() int {
	n := eventBytes + cap(e.Key) + cap(e.Value) + cap(e.ID) + cap(e.TraceContext) + len(e.Headers)*headerBytes + len(e.Row)*fieldBytes
	for i := range e.Headers {
		n += cap(e.Headers[i].Value)
	}
	for i := range e.Row {
		n += cap(e.Row[i].Value)
	}
	return n
}

// Tx is one committed transaction, or one part of a large one.
type Tx struct {
	Xid        uint32
	CommitLSN  pglogrepl.LSN // the commit record's LSN (BEGIN's final LSN)
	EndLSN     pglogrepl.LSN // the transaction's end LSN; set on the last part only
	CommitTime time.Time
	Events     []Event
	First      bool // the first part of the transaction
	Last       bool // the last part: EndLSN is set
}

// Stats counts what the decoder saw. Read it from the decoding goroutine.
type Stats struct {
	Transactions uint64
	Inserts      uint64 // outbox inserts turned into events
	Ignored      uint64 // updates, deletes and truncates of outbox tables
	OtherTables  uint64 // changes to tables that are not outboxes
	// Messages are the transactional messages of Config.MessagePrefix
	// turned into events; NonTransactional those of the prefix that are
	// not transactional (never events); OtherMessages the messages of
	// other prefixes.
	Messages, NonTransactional, OtherMessages uint64
}
