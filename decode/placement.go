package decode

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// partition reads the record's partition from Config.PartitionColumn:
// the router's column:partition placement (Debezium 3.6.1
// EventRouterDelegate: Struct.getInt32 of the column; null leaves the
// partition to the producer's key hash).
func (d *Decoder) partition(rel *relation, cols []pgoutput.TupleCol) (int32, bool, error) {
	if rel.partIdx < 0 {
		return 0, false, nil
	}
	c := cols[rel.partIdx]
	switch c.Kind {
	case pgoutput.KindNull:
		return 0, false, nil
	case pgoutput.KindText:
	default:
		return 0, false, fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.PartitionColumn, kindName(c.Kind))
	}
	n, err := strconv.ParseInt(string(c.Data), 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("%w: partition column %q: %v", ErrBadValue, d.cfg.PartitionColumn, err)
	}
	if n < 0 {
		// N.B. Kafka's ProducerRecord refuses a negative partition, which
		// fails Debezium's task: no record, here the poison event's path.
		return 0, false, fmt.Errorf("%w: partition column %q is %d: a partition is 0 or more", ErrBadValue, d.cfg.PartitionColumn, n)
	}
	return int32(n), true, nil
}

// timestamp reads the record's timestamp from Config.TimestampColumn, the
// router's table.field.event.timestamp: a timestamp without time zone is
// Debezium's io.debezium.time.Timestamp (precision up to 3) or
// MicroTimestamp (4 to 6) read as UTC, in milliseconds by Java's long
// division (truncated toward zero). NULL: the zero time (the commit time;
// Debezium takes its processing time).
func (d *Decoder) timestamp(rel *relation, cols []pgoutput.TupleCol) (time.Time, error) {
	if rel.stampIdx < 0 {
		return time.Time{}, nil
	}
	c := cols[rel.stampIdx]
	switch c.Kind {
	case pgoutput.KindNull:
		return time.Time{}, nil
	case pgoutput.KindText:
	default:
		return time.Time{}, fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.TimestampColumn, kindName(c.Kind))
	}
	micros, err := parseTimestamp(c.Data)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: timestamp column %q: %v", ErrBadValue, d.cfg.TimestampColumn, err)
	}
	ms := micros / 1000 // N.B. Go's division truncates toward zero, as Java's
	switch {
	case ms == -1:
		// N.B. Connect's checkAndConvertTimestamp takes -1 for "no
		// timestamp": the producer then stamps the record with the time
		// it sends it; walrelay's closest time is the commit time.
		return time.Time{}, nil
	case ms < 0:
		// N.B. any other negative timestamp fails Debezium's task
		// (InvalidRecordException "Invalid record timestamp").
		return time.Time{}, fmt.Errorf("%w: timestamp column %q is %s, before 1970: a Kafka record's timestamp is 0 or more", ErrBadValue, d.cfg.TimestampColumn, c.Data)
	}
	if ms > maxStampMs {
		// N.B. franz-go writes a record's timestamp from its UnixNano,
		// which ends in 2262; a broker takes only timestamps up to
		// message.timestamp.after.max.ms ahead of its clock anyway.
		return time.Time{}, fmt.Errorf("%w: timestamp column %q is %s, after 2262-04-11: beyond what walrelay's Kafka client writes", ErrBadValue, d.cfg.TimestampColumn, c.Data)
	}
	return time.UnixMilli(ms), nil
}

// maxStampMs is the last millisecond time.Time.UnixNano can give.
const maxStampMs = math.MaxInt64 / 1_000_000

var errTimestampFormat = errors.New("want PostgreSQL's ISO form YYYY-MM-DD HH:MM:SS[.ffffff] (DateStyle ISO); infinity and BC dates have no Kafka timestamp")

// parseTimestamp reads a timestamp without time zone in PostgreSQL's ISO
// output form (DateStyle ISO, the default) as microseconds since
// 1970-01-01 00:00:00 UTC.
func parseTimestamp(b []byte) (int64, error) {
	i := 0
	num := func(min, max int) (int, bool) {
		start, n := i, 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start < max {
			n = n*10 + int(b[i]-'0')
			i++
		}
		return n, i-start >= min
	}
	sep := func(c byte) bool {
		if i < len(b) && b[i] == c {
			i++
			return true
		}
		return false
	}
	year, ok1 := num(4, 9)
	ok2 := sep('-')
	month, ok3 := num(2, 2)
	ok4 := sep('-')
	day, ok5 := num(2, 2)
	ok6 := sep(' ')
	hour, ok7 := num(2, 2)
	ok8 := sep(':')
	min, ok9 := num(2, 2)
	ok10 := sep(':')
	sec, ok11 := num(2, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8 && ok9 && ok10 && ok11) {
		return 0, errTimestampFormat
	}
	frac := 0
	if sep('.') {
		start := i
		f, ok := num(1, 6)
		if !ok {
			return 0, errTimestampFormat
		}
		for k := i - start; k < 6; k++ {
			f *= 10
		}
		frac = f
	}
	if i != len(b) || month < 1 || month > 12 || day < 1 || day > 31 || hour > 24 || min > 59 || sec > 60 {
		return 0, errTimestampFormat
	}
	t := time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC)
	return t.Unix()*1_000_000 + int64(frac), nil
}
