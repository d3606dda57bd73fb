package pgoutput

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// N.B. pglogrepl's message parsers index their input without length checks
// (a truncated frame panics) and allocate per column; walrelay uses
// pglogrepl for the replication protocol around these messages and its LSN
// type.

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
	return string(r.strBytes(field))
}

// strBytes is str without the copy: it aliases the message.
func (r *reader) strBytes(field string) []byte {
	if r.err != nil {
		return nil
	}
	for i := r.off; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := r.b[r.off:i:i]
			r.off = i + 1
			return s
		}
	}
	r.fail(field)
	return nil
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
