package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// HeaderTruncated names the header values (and "key") that were cut to
// make a dead-letter record fit, each with its original size:
// "walrelay.error.message:20345,key:20000".
const HeaderTruncated = "walrelay.truncated"

// jsonTypes are the type OIDs whose text form is JSON already.
var jsonTypes = map[uint32]bool{114: true, 3802: true}

// rowJSON renders a row as a JSON object: json and jsonb columns as JSON,
// everything else as strings, NULL as null; dropped fields are left out.
func rowJSON(row []decode.Field, drop []bool) []byte {
	obj := make(map[string]any, len(row))
	for i, f := range row {
		switch {
		case drop[i]:
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

// deadLetterEvent builds the dead-letter record of a poison event, fitted
// to the dead-letter topic.
func (s *Sink) deadLetterEvent(tx *decode.Tx, ev *decode.Event) (*kgo.Record, error) {
	reason := ev.Reason
	r := &kgo.Record{
		Topic:     s.cfg.DeadLetterTopic,
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
	var st stamper
	r.Headers = s.stamp(&st, r, tx.CommitLSN, tx.CommitTime, r.Headers)
	f := fitter{names: make([]string, len(ev.Row)), sizes: make([]int, len(ev.Row))}
	for i, c := range ev.Row {
		f.names[i], f.sizes[i] = c.Name, len(c.Value)
	}
	if ev.DroppedColumn != "" {
		f.dropped = append(f.dropped, ev.DroppedColumn)
		f.droppedBytes = append(f.droppedBytes, ev.DroppedBytes)
	}
	f.render = func(drop []bool) []byte { return rowJSON(ev.Row, drop) }
	if err := s.fit(r, &f); err != nil {
		return nil, fmt.Errorf("%w: table %s, xid %d, commit lsn %s: %w (%s)", ErrPoison, ev.Table, tx.Xid, tx.CommitLSN, err, ev.Err)
	}
	return r, nil
}

// rejected reports whether Kafka refused the record batch itself, so that
// retrying it as it is can never succeed.
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
// refused on its own: the record's fields as JSON (without the value when
// it was too large), fitted to the dead-letter topic.
func (s *Sink) deadLetterRejected(r *kgo.Record, err error, meta recordMeta) (*kgo.Record, error) {
	var id []byte
	for _, h := range r.Headers {
		if h.Key == "id" {
			id = h.Value
		}
	}
	tooLarge := errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
	reason := deadLetterReason(err)
	// N.B. the commit time, not the record's: a record the broker
	// rejected for its timestamp (an event timestamp from
	// --timestamp-column too far ahead) would be rejected again.
	ts := r.Timestamp
	if !meta.commitTime.IsZero() {
		ts = meta.commitTime
	}
	dl := &kgo.Record{
		Topic:     s.cfg.DeadLetterTopic,
		Key:       r.Key,
		Timestamp: ts,
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
	if !meta.commitTime.IsZero() {
		var st stamper
		dl.Headers = s.stamp(&st, dl, meta.commitLSN, meta.commitTime, dl.Headers)
	}
	dl.Headers = traceHeaders(dl.Headers, r.Headers) // trace.go
	// The fields that may be dropped: the value, the key, each header.
	f := fitter{names: []string{"value", "key"}, sizes: []int{len(r.Value), len(r.Key)}}
	for _, h := range r.Headers {
		f.names = append(f.names, "headers."+h.Key)
		f.sizes = append(f.sizes, len(h.Value))
	}
	f.render = func(drop []bool) []byte {
		headers := make(map[string]string, len(r.Headers))
		for i, h := range r.Headers {
			if !drop[2+i] {
				headers[h.Key] = string(h.Value)
			}
		}
		body := map[string]any{"topic": r.Topic, "headers": headers}
		if !drop[1] {
			body["key"] = string(r.Key)
		}
		switch {
		case drop[0]:
		case r.Value == nil:
			body["value"] = nil
		default:
			body["value"] = string(r.Value)
		}
		value, _ := json.Marshal(body)
		return value
	}
	f.drop = make([]bool, len(f.names))
	if tooLarge {
		f.drop[0] = true
		f.dropped = append(f.dropped, "value")
		f.droppedBytes = append(f.droppedBytes, len(r.Value))
	}
	if err := s.fit(dl, &f); err != nil {
		return nil, fmt.Errorf("%w: xid %d, commit lsn %s, record for topic %s: %w", ErrPoison, meta.xid, meta.commitLSN, r.Topic, err)
	}
	return dl, nil
}

// fitter describes the droppable fields of a dead-letter record's value.
type fitter struct {
	names        []string
	sizes        []int
	drop         []bool              // dropped so far; nil: none
	render       func([]bool) []byte // the value without the dropped fields
	dropped      []string            // names of the dropped fields, in order
	droppedBytes []int               // and their sizes
}

// fit makes dl fit in a record batch of its own on the dead-letter topic.
// N.B. a dead-letter record that cannot be written halts the relay on
// every restart, so it must fit: the largest part goes first, one at a
// time, until it does: a field of the value is dropped
// (walrelay.dropped.column and walrelay.dropped.bytes name it and its
// size), a long header value or key is cut to 256 bytes
// (walrelay.truncated names it and its size); then every header value and
// the key are cut shorter still. Only if even that does not fit is it an
// error.
func (s *Sink) fit(dl *kgo.Record, f *fitter) error {
	limit := s.cfg.MaxMessageBytes
	if l, ok := s.known[dl.Topic]; ok {
		limit = l
	}
	if f.drop == nil {
		f.drop = make([]bool, len(f.names))
	}
	origHeaders, origKey := dl.Headers, dl.Key
	hdrs := slices.Clone(origHeaders)
	var truncated []string
	cutKey := func(n int) {
		if len(dl.Key) > n {
			dl.Key = cutUTF8(origKey, n)
			truncated = append(truncated, "key:"+strconv.Itoa(len(origKey)))
		}
	}
	cutHeader := func(i, n int) {
		if len(hdrs[i].Value) > n {
			hdrs[i].Value = cutUTF8(origHeaders[i].Value, n)
			truncated = append(truncated, hdrs[i].Key+":"+strconv.Itoa(len(origHeaders[i].Value)))
		}
	}
	fits := func() bool {
		dl.Value = f.render(f.drop)
		dl.Headers = slices.Clip(hdrs)
		if len(f.dropped) > 0 {
			var sizes []byte
			for i, n := range f.droppedBytes {
				if i > 0 {
					sizes = append(sizes, ',')
				}
				sizes = strconv.AppendInt(sizes, int64(n), 10)
			}
			dl.Headers = append(dl.Headers,
				kgo.RecordHeader{Key: HeaderDropped, Value: []byte(strings.Join(f.dropped, ","))},
				kgo.RecordHeader{Key: HeaderDroppedBytes, Value: sizes})
		}
		if len(truncated) > 0 {
			dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderTruncated, Value: []byte(strings.Join(truncated, ","))})
		}
		return loneBatchBytes(dl) <= int(limit)
	}
	const cut = 256
	for !fits() {
		// The largest of: a field not yet dropped, a header value or the
		// key longer than cut.
		field, header, key, largest := -1, -1, false, 0
		for j, n := range f.sizes {
			if !f.drop[j] && n > largest {
				field, largest = j, n
			}
		}
		for j, h := range hdrs {
			if len(h.Value) > cut && len(h.Value) > largest {
				field, header, largest = -1, j, len(h.Value)
			}
		}
		if len(dl.Key) > cut && len(dl.Key) > largest {
			field, header, key = -1, -1, true
		}
		switch {
		case key:
			cutKey(cut)
		case header >= 0:
			cutHeader(header, cut)
		case field >= 0:
			f.drop[field] = true
			f.dropped = append(f.dropped, f.names[field])
			f.droppedBytes = append(f.droppedBytes, f.sizes[field])
		default:
			// Nothing large is left: cut everything shorter.
			for n := cut / 2; n >= 16; n /= 2 {
				truncated = truncated[:0]
				dl.Key = origKey
				hdrs = slices.Clone(origHeaders)
				cutKey(n)
				for i := range hdrs {
					cutHeader(i, n)
				}
				if fits() {
					return nil
				}
			}
			return fmt.Errorf("dead-letter record does not fit in the %d bytes topic %s accepts even without its fields and with its headers cut (raise --kafka-max-message-bytes or the topic's max.message.bytes)",
				limit, dl.Topic)
		}
	}
	return nil
}

// cutUTF8 returns at most n bytes of b, not splitting a UTF-8 sequence.
func cutUTF8(b []byte, n int) []byte {
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n:n]
}

// recordMeta describes a Tx part for dead-letter headers. N.B. kept as
// values and formatted only when a record is dead-lettered: formatting them
// for every part cost about 3% of walrelay's CPU in a drain of single-row
// transactions (fmt.Sprintf in LSN.String).
type recordMeta struct {
	table      string
	commitLSN  pglogrepl.LSN
	xid        uint32
	commitTime time.Time // the transaction's, for the commit-to-ack latency
}

// poison dead-letters a poison event (reason: its walrelay.error.class).
func (s *Sink) poison(ctx context.Context, tx *decode.Tx, ev *decode.Event, reason string, a *txAcks, meta recordMeta) (*txAcks, error) {
	dl, err := s.deadLetterEvent(tx, ev)
	if err != nil {
		return a, err
	}
	s.log.Warn("poison event: dead-lettered", zap.String("table", ev.Table), zap.Uint32("xid", tx.Xid),
		zap.Stringer("commit_lsn", tx.CommitLSN), zap.ByteString("id", ev.ID), zap.String("topic", s.cfg.DeadLetterTopic), zap.Error(ev.Err))
	s.metrics.DeadLetter(reason)
	return s.produceDeadLetter(ctx, dl, a, meta)
}

// rejectRecord dead-letters record r, which cannot go to its topic (why),
// logging msg. Admission decided on it: with --on-poison=halt it is not
// called (haltError).
func (s *Sink) rejectRecord(ctx context.Context, tx *decode.Tx, r *kgo.Record, why error, msg string, a *txAcks, meta recordMeta) (*txAcks, error) {
	// N.B. the record as it was when it fits the dead-letter topic:
	// walrelay dlq redrive --offset re-publishes it once the cause is fixed.
	reason := deadLetterReason(why)
	dl := s.recordLetter(tx, s.curEv, r, reason, why.Error(), []kgo.RecordHeader{{Key: HeaderPosition, Value: []byte(s.curPos.String())}})
	if dl == nil {
		var err error
		if dl, err = s.deadLetterRejected(r, why, meta); err != nil {
			return a, err
		}
	}
	s.log.Warn(msg, zap.String("topic", r.Topic), zap.String("table", meta.table),
		zap.Uint32("xid", tx.Xid), zap.Stringer("commit_lsn", tx.CommitLSN), zap.Error(why))
	s.metrics.DeadLetter(reason)
	if t := s.deps.Tracer; t != nil {
		t.DeadLettered(r, why) // trace.go
	}
	return s.produceDeadLetter(ctx, dl, a, meta)
}

// produceDeadLetter hands a dead-letter record to the client; its promise
// acknowledges the event.
func (s *Sink) produceDeadLetter(ctx context.Context, dl *kgo.Record, a *txAcks, meta recordMeta) (*txAcks, error) {
	a, err := s.handOver(ctx, dl, a, meta)
	if err != nil {
		return nil, err
	}
	s.cur.Add(1)
	dl.Context = s.held
	s.cl.Produce(ctx, dl, a.deadLettered)
	return a, nil
}
