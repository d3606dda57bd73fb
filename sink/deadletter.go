package sink

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
)

// Poison handling: what happens to an event that cannot become a record.
const (
	OnPoisonDeadLetter = "dead-letter" // park it in the dead-letter topic and go on
	OnPoisonHalt       = "halt"        // stop without confirming past it
)

// Dead-letter record headers.
const (
	HeaderErrorClass   = "walrelay.error.class"
	HeaderErrorMessage = "walrelay.error.message"
	HeaderTable        = "walrelay.source.table"
	HeaderCommitLSN    = "walrelay.commit.lsn"
	HeaderXid          = "walrelay.xid"
	HeaderEventID      = "walrelay.event.id"
	HeaderTopic        = "walrelay.original.topic"
	HeaderDropped      = "walrelay.dropped.column"
	HeaderDroppedBytes = "walrelay.dropped.bytes"
)

// jsonTypes are the type OIDs whose text form is JSON already.
var jsonTypes = map[uint32]bool{114: true, 3802: true}

// rowJSON renders a row as a JSON object: json and jsonb columns as JSON,
// everything else as strings, NULL as null.
func rowJSON(row []decode.Field) []byte {
	obj := make(map[string]any, len(row))
	for _, f := range row {
		switch {
		case f.Null:
			obj[f.Name] = nil
		case jsonTypes[f.Type] && json.Valid(f.Value):
			obj[f.Name] = json.RawMessage(f.Value)
		default:
			obj[f.Name] = string(f.Value)
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// deadLetterEvent builds the dead-letter record of a poison event.
func (s *Sink) deadLetterEvent(tx *decode.Tx, ev *decode.Event) *kgo.Record {
	reason := decode.Reason(ev.Err)
	r := &kgo.Record{
		Topic:     s.cfg.DeadLetterTopic,
		Value:     rowJSON(ev.Row),
		Timestamp: tx.CommitTime,
		Headers: []kgo.RecordHeader{
			{Key: HeaderErrorClass, Value: []byte(reason)},
			{Key: HeaderErrorMessage, Value: []byte(ev.Err.Error())},
			{Key: HeaderTable, Value: []byte(ev.Table)},
			{Key: HeaderCommitLSN, Value: []byte(tx.CommitLSN.String())},
			{Key: HeaderXid, Value: strconv.AppendUint(nil, uint64(tx.Xid), 10)},
		},
	}
	if len(ev.Key) > 0 {
		r.Key = ev.Key
	}
	if len(ev.ID) > 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderEventID, Value: ev.ID})
	}
	if ev.DroppedColumn != "" {
		r.Headers = append(r.Headers,
			kgo.RecordHeader{Key: HeaderDropped, Value: []byte(ev.DroppedColumn)},
			kgo.RecordHeader{Key: HeaderDroppedBytes, Value: strconv.AppendInt(nil, int64(ev.DroppedBytes), 10)})
	}
	return r
}

// rejected reports whether Kafka refused the record itself, so that
// retrying it can never succeed.
func rejected(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.CorruptMessage, kerr.InvalidTopicException, kerr.InvalidTimestamp} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// deadLetterRejected builds the dead-letter record of a record Kafka
// refused: the record's fields as JSON (without the value when it was too
// large).
func (s *Sink) deadLetterRejected(r *kgo.Record, err error, meta recordMeta) *kgo.Record {
	headers := make(map[string]string, len(r.Headers))
	var id []byte
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
		if h.Key == "id" {
			id = h.Value
		}
	}
	body := map[string]any{"topic": r.Topic, "key": string(r.Key), "headers": headers}
	tooLarge := errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
	if !tooLarge {
		if r.Value == nil {
			body["value"] = nil
		} else {
			body["value"] = string(r.Value)
		}
	}
	value, _ := json.Marshal(body)
	reason := "rejected_by_broker"
	if tooLarge {
		reason = "too_large"
	}
	dl := &kgo.Record{
		Topic:     s.cfg.DeadLetterTopic,
		Key:       r.Key,
		Value:     value,
		Timestamp: r.Timestamp,
		Headers: []kgo.RecordHeader{
			{Key: HeaderErrorClass, Value: []byte(reason)},
			{Key: HeaderErrorMessage, Value: []byte(err.Error())},
			{Key: HeaderTable, Value: []byte(meta.table)},
			{Key: HeaderCommitLSN, Value: []byte(meta.commitLSN.String())},
			{Key: HeaderXid, Value: strconv.AppendUint(nil, uint64(meta.xid), 10)},
			{Key: HeaderTopic, Value: []byte(r.Topic)},
		},
	}
	if id != nil {
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderEventID, Value: id})
	}
	if tooLarge {
		dl.Headers = append(dl.Headers,
			kgo.RecordHeader{Key: HeaderDropped, Value: []byte("value")},
			kgo.RecordHeader{Key: HeaderDroppedBytes, Value: strconv.AppendInt(nil, int64(len(r.Value)), 10)})
	}
	return dl
}

// recordMeta describes a Tx part for dead-letter headers. N.B. kept as
// values and formatted only when a record is dead-lettered: formatting them
// for every part cost about 3% of walrelay's CPU in a drain of single-row
// transactions (fmt.Sprintf in LSN.String).
type recordMeta struct {
	table     string
	commitLSN pglogrepl.LSN
	xid       uint32
}

// rejection is a record Kafka refused, waiting to be dead-lettered.
type rejection struct {
	rec  *kgo.Record
	err  error
	acks *txAcks
}

// rejections is an unbounded queue, so that a promise never blocks.
type rejections struct {
	mu    sync.Mutex
	items []rejection
	ready chan struct{}
}

func (q *rejections) push(r rejection) {
	q.mu.Lock()
	q.items = append(q.items, r)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *rejections) take() []rejection {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// deadLetterLoop produces the dead-letter records of rejected records.
func (s *Sink) deadLetterLoop() {
	defer close(s.loopDone)
	for {
		select {
		case <-s.closing:
			return
		case <-s.rejects.ready:
		}
		for _, rj := range s.rejects.take() {
			dl := s.deadLetterRejected(rj.rec, rj.err, rj.acks.meta)
			s.log.Warn("record rejected by Kafka: dead-lettered", zap.String("topic", rj.rec.Topic),
				zap.String("table", rj.acks.meta.table), zap.Stringer("commit_lsn", rj.acks.meta.commitLSN), zap.Error(rj.err))
			s.metrics.DeadLetter(string(dl.Headers[0].Value))
			s.cl.Produce(s.ctx, dl, rj.acks.deadLettered)
		}
	}
}
