package decode

import (
	"fmt"

	"github.com/walrelay/walrelay/decode/connect"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// recordOverhead is a generous bound on what a record adds to its key,
// value and headers inside a record batch (lengths, offsets, timestamps,
// and the batch header when the record is alone in its batch).
const recordOverhead = 128

// event maps one inserted row, copying what the event keeps out of the
// message.
func (d *Decoder) event(rel *relation, cols []pgoutput.TupleCol) Event {
	var id, key []byte // as far as they were read: a poison event keeps them
	fail := func(err error) Event { return poisonEvent(rel, cols, id, key, err, -1) }
	if rel.err != nil {
		// N.B. the id and the key, when their columns can be mapped, so
		// that the dead-letter record names the event.
		if len(cols) == len(rel.columns) {
			if rel.idIdx >= 0 && cols[rel.idIdx].Kind == pgoutput.KindText {
				id = cols[rel.idIdx].Data
			}
			if rel.keyIdx >= 0 && cols[rel.keyIdx].Kind == pgoutput.KindText {
				key = cols[rel.keyIdx].Data
			}
		}
		return fail(rel.err)
	}
	if len(cols) != len(rel.columns) {
		return fail(fmt.Errorf("%w: row has %d columns, relation %s has %d", ErrBadValue, len(cols), rel.qualified, len(rel.columns)))
	}
	var err error
	if id, err = requiredText(cols[rel.idIdx], d.cfg.IDColumn, ErrNullID, ErrNullID); err != nil {
		return fail(err)
	}
	if key, err = requiredText(cols[rel.keyIdx], d.cfg.KeyColumn, ErrNullKey, ErrEmptyKey); err != nil {
		return fail(err)
	}
	// The payload and the header values as sent; a bytea is decoded when
	// it is copied.
	p := cols[rel.payloadIdx]
	switch p.Kind {
	case pgoutput.KindNull, pgoutput.KindText:
	default:
		return fail(fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.PayloadColumn, kindName(p.Kind)))
	}
	if p.Kind == pgoutput.KindText && rel.payloadBytea && !isHexBytea(p.Data) {
		return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, errByteaFormat))
	}
	// N.B. the router's tombstone test: a NULL payload, or a text one
	// that Java's trim() empties (a bytea's ByteBuffer never prints
	// empty).
	tomb := d.cfg.TombstoneOnEmptyPayload && (p.Kind == pgoutput.KindNull || !rel.payloadBytea && connect.JavaBlank(p.Data))
	var value []byte // the value in a json format, in d.vbuf
	var valueLen int
	switch {
	case tomb:
	case d.cfg.ValueFormat == FormatJSON || d.cfg.ValueFormat == FormatJSONSchema:
		v, err := d.encodeValue(rel, cols)
		if err != nil {
			return fail(err)
		}
		value, valueLen = v, len(v)
	default:
		valueLen = decodedLen(p, rel.payloadBytea)
	}
	keyData := key
	if d.cfg.KeyFormat != FormatString {
		k, err := d.encodeKey(rel, key)
		if err != nil {
			return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.KeyColumn, err))
		}
		keyData = k
	}
	n := len(id) + len(keyData) + valueLen
	size := len(id) + len(keyData) + valueLen + 2 // Event.Size of the result
	for i, ci := range rel.headerIdx {
		c := cols[ci]
		switch c.Kind {
		case pgoutput.KindText, pgoutput.KindNull:
		default:
			return fail(fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.HeaderColumns[i].Column, kindName(c.Kind)))
		}
		bytea := rel.columns[ci].TypeOID == oidBytea
		if c.Kind == pgoutput.KindText && bytea && !isHexBytea(c.Data) {
			return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.HeaderColumns[i].Column, errByteaFormat))
		}
		l := decodedLen(c, bytea)
		n += l
		size += len(d.cfg.HeaderColumns[i].Header) + l
	}
	tc := traceData(rel, cols)
	n += len(tc)
	topic, err := d.topic(rel, cols)
	if err != nil {
		return fail(err)
	}
	part, hasPart, err := d.partition(rel, cols)
	if err != nil {
		return fail(err)
	}
	stamp, err := d.timestamp(rel, cols)
	if err != nil {
		return fail(err)
	}
	size += len(topic)
	if max := d.cfg.MaxRecordBytes; max > 0 && size+recordOverhead > max {
		// N.B. the payload is not copied: the poison event keeps the rest
		// of the row for its dead-letter record.
		ev := poisonEvent(rel, cols, id, key, fmt.Errorf("%w: the record takes about %d bytes, Kafka accepts %d (--kafka-max-message-bytes; the broker's message.max.bytes)", ErrTooLarge, size+recordOverhead, max), rel.payloadIdx)
		ev.Topic = topic
		ev.DroppedColumn = d.cfg.PayloadColumn
		ev.DroppedBytes = len(p.Data)
		return ev
	}

	// One allocation for the event's bytes: id, header values, key, value.
	buf := grow(n)
	ev := Event{Table: rel.qualified, Topic: topic, Partition: part, HasPartition: hasPart, Timestamp: stamp}
	var off int
	ev.ID, off = put(buf, off, id)
	ev.TraceContext, off = put(buf, off, tc)
	if len(rel.headerIdx) > 0 {
		ev.Headers = make([]Header, len(rel.headerIdx))
		for i, ci := range rel.headerIdx {
			ev.Headers[i].Key = d.cfg.HeaderColumns[i].Header
			c := cols[ci]
			if c.Kind == pgoutput.KindNull {
				continue
			}
			if rel.columns[ci].TypeOID == oidBytea {
				ev.Headers[i].Value, off, err = putBytea(buf, off, c.Data)
			} else {
				ev.Headers[i].Value, off = put(buf, off, c.Data)
			}
			if err != nil {
				return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.HeaderColumns[i].Column, err))
			}
		}
	}
	ev.Key, off = put(buf, off, keyData)
	switch {
	case tomb:
	case value != nil:
		ev.Value, off = put(buf, off, value)
	case p.Kind == pgoutput.KindText:
		if rel.payloadBytea {
			ev.Value, off, err = putBytea(buf, off, p.Data)
		} else {
			ev.Value, off = put(buf, off, p.Data)
		}
		if err != nil {
			return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, err))
		}
	}
	giveRest(buf, off, &ev.Key, &ev.Value)
	return ev
}

// topic renders the template for a row, caching the result per value.
func (d *Decoder) topic(rel *relation, cols []pgoutput.TupleCol) (string, error) {
	buf := d.buf[:0]
	ci := 0
	for _, p := range rel.topicParts {
		if p.column == "" {
			buf = append(buf, p.lit...)
			continue
		}
		c := cols[rel.topicCols[ci]]
		ci++
		if c.Kind != pgoutput.KindText {
			return "", fmt.Errorf("%w: topic column %q is %s", ErrInvalidTopic, p.column, kindName(c.Kind))
		}
		buf = append(buf, c.Data...)
	}
	d.buf = buf
	if t, ok := rel.topics[string(buf)]; ok { // no allocation for the lookup
		return t, nil
	}
	if err, ok := rel.topicErrs[string(buf)]; ok {
		return "", err
	}
	name := string(buf)
	if d.re != nil {
		name = string(d.re.AppendTopic(nil, buf))
	}
	if err := ValidTopic(name); err != nil {
		err = fmt.Errorf("%w: template %q gives %w", ErrInvalidTopic, d.template.String(), err)
		if len(rel.topicErrs) < 1024 {
			rel.topicErrs[name] = err
		}
		return "", err
	}
	if len(rel.topics) < 65536 {
		rel.topics[name] = name
	}
	return name, nil
}

// poisonEvent is the event of a row that cannot become a record: the row
// (without column drop, if drop >= 0) and the id and key read so far, copied
// out of the message. N.B. the id and key get an allocation of their own:
// the dead-letter record keeps them, and they must not keep the row alive.
func poisonEvent(rel *relation, cols []pgoutput.TupleCol, id, key []byte, err error, drop int) Event {
	ev := Event{Table: rel.qualified, Err: err, Reason: Reason(err)}
	buf := grow(len(id) + len(key))
	off := 0
	ev.ID, off = put(buf, off, id)
	ev.Key, off = put(buf, off, key)
	giveRest(buf, off, &ev.ID, &ev.Key)

	n := 0
	for i, c := range cols {
		if i != drop {
			n += len(c.Data)
		}
	}
	rowBuf := grow(n)
	off = 0
	ev.Row = make([]Field, 0, len(cols))
	var last *[]byte
	for i, c := range cols {
		if i == drop {
			continue
		}
		f := Field{Null: c.Kind == pgoutput.KindNull}
		if i < len(rel.columns) {
			f.Name, f.Type = rel.columns[i].Name, rel.columns[i].TypeOID
		}
		f.Value, off = put(rowBuf, off, c.Data)
		ev.Row = append(ev.Row, f)
		if f.Value != nil {
			last = &ev.Row[len(ev.Row)-1].Value
		}
	}
	giveRest(rowBuf, off, last)
	return ev
}

// requiredText is the text of column c (named column), which the event
// needs: NULL is a poison event of class null, an empty string one of
// class empty, another kind (binary) a bad value. The text is returned
// with an empty string's error, so that the dead letter keeps it.
func requiredText(c pgoutput.TupleCol, column string, null, empty error) ([]byte, error) {
	switch c.Kind {
	case pgoutput.KindText:
		if len(c.Data) == 0 {
			return c.Data, fmt.Errorf("%w: column %q is an empty string", empty, column)
		}
		return c.Data, nil
	case pgoutput.KindNull:
		return nil, fmt.Errorf("%w: column %q is NULL", null, column)
	default:
		return nil, fmt.Errorf("%w: column %q is %s", ErrBadValue, column, kindName(c.Kind))
	}
}
