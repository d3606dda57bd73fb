package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// The parsers below read pgoutput protocol version 1 messages with a bounds
// check on every field. N.B. pglogrepl's message parsers index their input
// without length checks (a truncated frame panics) and allocate per column;
// walrelay uses pglogrepl for the replication protocol around these
// messages and its LSN type.

// ErrTruncated is wrapped by every error about a message shorter than its
// fields say.
var ErrTruncated = errors.New("truncated pgoutput message")

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(field string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at offset %d of %d", ErrTruncated, field, r.off, len(r.b))
	}
}

func (r *reader) u8(field string) byte {
	if r.err != nil || r.off+1 > len(r.b) {
		r.fail(field)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16(field string) uint16 {
	if r.err != nil || r.off+2 > len(r.b) {
		r.fail(field)
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32(field string) uint32 {
	if r.err != nil || r.off+4 > len(r.b) {
		r.fail(field)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(field string) uint64 {
	if r.err != nil || r.off+8 > len(r.b) {
		r.fail(field)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// str reads a NUL-terminated string.
func (r *reader) str(field string) string {
	if r.err != nil {
		return ""
	}
	for i := r.off; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.off:i])
			r.off = i + 1
			return s
		}
	}
	r.fail(field)
	return ""
}

// bytes returns the next n bytes without copying.
func (r *reader) bytes(n int, field string) []byte {
	if r.err != nil || n < 0 || r.off+n > len(r.b) {
		r.fail(field)
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

// pgEpoch is 2000-01-01 UTC, the origin of PostgreSQL timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func pgTime(micros uint64) time.Time {
	return pgEpoch.Add(time.Duration(int64(micros)) * time.Microsecond)
}

type beginMsg struct {
	finalLSN   pglogrepl.LSN
	commitTime time.Time
	xid        uint32
}

func parseBegin(b []byte) (beginMsg, error) {
	r := reader{b: b, off: 1}
	m := beginMsg{
		finalLSN:   pglogrepl.LSN(r.u64("begin final lsn")),
		commitTime: pgTime(r.u64("begin commit time")),
		xid:        r.u32("begin xid"),
	}
	return m, r.err
}

type commitMsg struct {
	commitLSN  pglogrepl.LSN
	endLSN     pglogrepl.LSN
	commitTime time.Time
}

func parseCommit(b []byte) (commitMsg, error) {
	r := reader{b: b, off: 1}
	r.u8("commit flags")
	m := commitMsg{
		commitLSN:  pglogrepl.LSN(r.u64("commit lsn")),
		endLSN:     pglogrepl.LSN(r.u64("commit end lsn")),
		commitTime: pgTime(r.u64("commit time")),
	}
	return m, r.err
}

// CommitEndLSN reads the transaction end LSN of a pgoutput Commit message
// without decoding the rest. ok is false if b is not a well-formed Commit.
func CommitEndLSN(b []byte) (lsn pglogrepl.LSN, ok bool) {
	if len(b) < 26 || b[0] != 'C' {
		return 0, false
	}
	return pglogrepl.LSN(binary.BigEndian.Uint64(b[10:])), true
}

type column struct {
	name    string
	typeOID uint32
	typmod  int32
	key     bool
}

type relationMsg struct {
	id        uint32
	namespace string
	name      string
	columns   []column
}

func parseRelation(b []byte) (relationMsg, error) {
	r := reader{b: b, off: 1}
	m := relationMsg{
		id:        r.u32("relation id"),
		namespace: r.str("relation namespace"),
		name:      r.str("relation name"),
	}
	r.u8("relation replica identity")
	n := int(r.u16("relation column count"))
	if r.err == nil && n > (len(b)-r.off)/10 {
		// Each column takes at least 10 bytes; refuse absurd counts before allocating.
		r.fail("relation columns")
	}
	if r.err != nil {
		return m, r.err
	}
	m.columns = make([]column, n)
	for i := range m.columns {
		c := &m.columns[i]
		c.key = r.u8("column flags")&1 == 1
		c.name = r.str("column name")
		c.typeOID = r.u32("column type")
		c.typmod = int32(r.u32("column type modifier"))
	}
	return m, r.err
}

// Tuple column kinds, as pgoutput sends them.
const (
	kindNull      = 'n'
	kindUnchanged = 'u' // unchanged TOASTed value: never in an insert
	kindText      = 't'
	kindBinary    = 'b'
)

type tupleCol struct {
	kind byte
	data []byte // aliases the message buffer
}

// parseTuple reads TupleData into cols (reused), returning it resized.
func parseTuple(r *reader, cols []tupleCol) []tupleCol {
	n := int(r.u16("tuple column count"))
	if r.err != nil {
		return cols[:0]
	}
	if n > len(r.b)-r.off {
		r.fail("tuple columns")
		return cols[:0]
	}
	cols = cols[:0]
	for i := 0; i < n; i++ {
		kind := r.u8("tuple column kind")
		var data []byte
		switch kind {
		case kindText, kindBinary:
			l := r.u32("tuple column length")
			if uint64(l) > uint64(len(r.b)) {
				r.fail("tuple column data")
			}
			data = r.bytes(int(l), "tuple column data")
		case kindNull, kindUnchanged:
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unknown tuple column kind %q at offset %d", kind, r.off-1)
			}
		}
		if r.err != nil {
			return cols[:0]
		}
		cols = append(cols, tupleCol{kind: kind, data: data})
	}
	return cols
}
