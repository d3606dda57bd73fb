package decode

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// The message source (Config.Messages): an event written with
// pg_logical_emit_message(true, prefix, content) instead of an outbox row.
//
// The content is a JSON object whose keys are the mapped column names
// (--id-column, --key-column, --payload-column, the --header-columns
// sources, the topic template's columns): the shape Debezium's
// DecodeLogicalDecodingMessageContent transform makes of a message before
// its Outbox Event Router. Each field becomes the column of that name of a
// row of a virtual outbox table, and the row is mapped by the code that
// maps an outbox row (Decoder.event), so that a message gives the very
// record an outbox row with the same values gives:
//
//   - a JSON string is the column's text (unescaped);
//   - null is NULL;
//   - a number, true, false, an object or an array is its JSON text as
//     written in the content;
//   - the payload is a jsonb column unless its value is a string, which is
//     a text column's value (the record value is the string itself).
//
// walrelay.emit (walrelay setup) writes the content with jsonb's text
// output, so a payload reaches Kafka byte for byte as a jsonb payload
// column renders it.

// MessageTable is what Event.Table (and the dead-letter header
// walrelay.source.table) says for an event of a message of prefix.
func MessageTable(prefix string) string { return "message:" + prefix }

// messageSource is the decoder's state for the message source.
type messageSource struct {
	// json and text are the virtual outbox's mapping with a jsonb and a
	// text payload; names are its columns, payload the payload's index.
	json, text *relation
	names      []string
	payload    int
	trace      string // the optional trace-context field (tracecontext.go); "" none
	table      string

	fields []jsonField          // the content's members, reused
	cols   []pgoutput.TupleCol  // the virtual row, reused
	buf    []byte               // unescaped strings, reused
	warned bool                 // the non-transactional warning was logged
	row    [1]pgoutput.TupleCol // a poison event's row: the raw content
	poison relation             // the relation of that row
	// poisonBytes is the relation of the row of a content that is not
	// UTF-8: bytea, the content in bytea's hex form, so that the dead
	// letter (JSON) keeps every byte.
	poisonBytes relation
	hex         []byte
}

// initMessages builds the virtual outbox of the message source. A mapping
// that cannot work for it (a format the payload cannot have) is an error:
// every message would be poison.
func (d *Decoder) initMessages() error {
	want, err := MappedColumns(d.cfg)
	if err != nil {
		return err
	}
	ms := &d.msg
	ms.table = MessageTable(d.cfg.MessagePrefix)
	ms.poison = *newRelation(ms.table, []pgoutput.Column{{Name: "content", TypeOID: oidText}})
	ms.poisonBytes = *newRelation(ms.table, []pgoutput.Column{{Name: "content", TypeOID: oidBytea}})
	for name := range want {
		ms.names = append(ms.names, name)
	}
	sort.Strings(ms.names)
	if tc := d.cfg.traceColumn(); tc != "" && !slices.Contains(ms.names, tc) {
		ms.names, ms.trace = append(ms.names, tc), tc // tracecontext.go
	}
	ms.payload = slices.Index(ms.names, d.cfg.PayloadColumn)
	build := func(payloadOID uint32) (*relation, error) {
		cols := make([]pgoutput.Column, len(ms.names))
		for i, n := range ms.names {
			cols[i] = pgoutput.Column{Name: n, TypeOID: oidText, TypeMod: -1}
		}
		cols[ms.payload].TypeOID = payloadOID
		rel := newRelation(ms.table, cols)
		rel.outbox = true
		rel = d.mapOutbox(rel, pgoutput.Relation{Namespace: "message", Name: d.cfg.MessagePrefix, Columns: cols})
		if rel.err != nil {
			return nil, fmt.Errorf("map messages of prefix %q: %w", d.cfg.MessagePrefix, rel.err)
		}
		return rel, nil
	}
	if ms.json, err = build(oidJSONB); err != nil {
		return err
	}
	ms.text, err = build(oidText)
	return err
}

// message handles a logical decoding message ('M').
func (d *Decoder) message(msg []byte) (*Tx, error) {
	m, err := pgoutput.ParseLogicalMessage(msg)
	if err != nil {
		return nil, err
	}
	if !d.cfg.Messages {
		return nil, nil // not requested; skipped as before
	}
	if string(m.Prefix) != d.cfg.MessagePrefix { // no allocation for the comparison
		d.Stats.OtherMessages++
		return nil, nil
	}
	if m.Flags&1 == 0 {
		// N.B. a non-transactional message is written to the WAL at once
		// and decoded even when its transaction rolls back: it is no
		// event of a committed transaction, and is never published.
		d.Stats.NonTransactional++
		if !d.msg.warned {
			d.msg.warned = true
			d.log.Warn("non-transactional logical decoding message with the outbox prefix: not relayed (it survives a rollback, so it is no event); emit events with pg_logical_emit_message(true, ...) or walrelay.emit; walrelay_messages_nontransactional_total counts them",
				zap.ByteString("prefix", m.Prefix), zap.Stringer("lsn", m.LSN))
		}
		return nil, nil
	}
	if !d.tx.InTx() {
		return nil, errors.New("transactional message outside a transaction: protocol out of sync")
	}
	d.Stats.Messages++
	return d.add(d.messageEvent(m.Content)), nil
}

// messageEvent maps one message's content to an event.
func (d *Decoder) messageEvent(content []byte) Event {
	ms := &d.msg
	ms.cols = ms.cols[:0]
	// N.B. PostgreSQL sends a message's content as it was emitted, never
	// converted (the bytea form of pg_logical_emit_message takes any
	// bytes), and json.Valid takes strings that are not UTF-8.
	if !utf8.Valid(content) {
		ms.hex = append(append(ms.hex[:0], `\x`...), make([]byte, hex.EncodedLen(len(content)))...)
		hex.Encode(ms.hex[2:], content)
		ms.row[0] = pgoutput.TupleCol{Kind: pgoutput.KindText, Data: ms.hex}
		return poisonEvent(&ms.poisonBytes, ms.row[:], nil, nil,
			fmt.Errorf("%w: message content is not valid UTF-8 (the dead letter has it as bytea)", ErrBadValue), -1)
	}
	if !json.Valid(content) {
		return d.messagePoison(content, fmt.Errorf("%w: message content is not valid JSON", ErrBadValue))
	}
	var ok bool
	ms.fields, ok = objectFields(content, ms.fields[:0])
	if !ok {
		return d.messagePoison(content, fmt.Errorf("%w: message content is not a JSON object", ErrBadValue))
	}
	// N.B. unescaped strings never outgrow their JSON text: with room for
	// the whole content, appending never moves what was appended before.
	ms.buf = slices.Grow(ms.buf[:0], len(content))
	var missing []string
	for _, name := range ms.names {
		i := ms.last(name)
		if i < 0 && name == ms.trace {
			ms.cols = append(ms.cols, pgoutput.TupleCol{Kind: pgoutput.KindNull}) // optional
			continue
		}
		if i < 0 {
			missing = append(missing, name)
			ms.cols = append(ms.cols, pgoutput.TupleCol{Kind: pgoutput.KindNull})
			continue
		}
		ms.cols = append(ms.cols, ms.value(ms.fields[i].val))
	}
	if len(missing) > 0 {
		want, _ := MappedColumns(d.cfg)
		flags := make([]string, len(missing))
		for i, n := range missing {
			flags[i] = fmt.Sprintf("%q (%s)", n, want[n])
		}
		return d.messagePoison(content, fmt.Errorf("%w: message content has no field %s", ErrMissingColumn, strings.Join(flags, ", ")))
	}
	rel := ms.json
	if ms.cols[ms.payload].Kind == pgoutput.KindText && ms.fields[ms.last(d.cfg.PayloadColumn)].val[0] == '"' {
		rel = ms.text
	}
	ev := d.event(rel, ms.cols)
	if ev.Err != nil && !errors.Is(ev.Err, ErrTooLarge) {
		// N.B. the raw content, as for a content that cannot be read; a
		// record too large keeps the fields but the payload.
		return d.messagePoison(content, ev.Err)
	}
	return ev
}

// messagePoison is the poison event of a message: its raw content as the
// row's one field "content", and the id and the key when they were read.
func (d *Decoder) messagePoison(content []byte, err error) Event {
	ms := &d.msg
	ms.row[0] = pgoutput.TupleCol{Kind: pgoutput.KindText, Data: content}
	var id, key []byte
	if i := slices.Index(ms.names, d.cfg.IDColumn); i >= 0 && i < len(ms.cols) && ms.cols[i].Kind == pgoutput.KindText {
		id = ms.cols[i].Data
	}
	if i := slices.Index(ms.names, d.cfg.KeyColumn); i >= 0 && i < len(ms.cols) && ms.cols[i].Kind == pgoutput.KindText {
		key = ms.cols[i].Data
	}
	return poisonEvent(&ms.poison, ms.row[:], id, key, err, -1)
}

// last is the index of the member named name, the last one when the key
// repeats (as jsonb keeps it), or -1.
func (ms *messageSource) last(name string) int {
	for i := len(ms.fields) - 1; i >= 0; i-- {
		k := ms.fields[i].key
		inner := k[1 : len(k)-1]
		if bytes.IndexByte(inner, '\\') < 0 {
			if string(inner) == name {
				return i
			}
			continue
		}
		var s string
		if json.Unmarshal(k, &s) == nil && s == name { // a rare escaped key
			return i
		}
	}
	return -1
}

// value turns a member's JSON text into a column value (see above).
func (ms *messageSource) value(v []byte) pgoutput.TupleCol {
	switch {
	case v[0] == 'n':
		return pgoutput.TupleCol{Kind: pgoutput.KindNull}
	case v[0] != '"':
		return pgoutput.TupleCol{Kind: pgoutput.KindText, Data: v}
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return pgoutput.TupleCol{Kind: pgoutput.KindText, Data: inner}
	}
	start := len(ms.buf)
	ms.buf = appendUnescaped(ms.buf, inner)
	return pgoutput.TupleCol{Kind: pgoutput.KindText, Data: ms.buf[start:len(ms.buf):len(ms.buf)]}
}
