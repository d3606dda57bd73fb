package decode

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// PostgreSQL type OIDs walrelay maps.
const (
	oidBool    = 16
	oidBytea   = 17
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidJSON    = 114
	oidBpchar  = 1042
	oidVarchar = 1043
	oidStamp   = 1114 // timestamp (without time zone)
	oidUUID    = 2950
	oidJSONB   = 3802
)

// grow returns an empty slice with room for n bytes, its capacity what the
// allocator really gives (its size class), so that it can be counted.
func grow(n int) []byte {
	if n == 0 {
		return nil
	}
	return slices.Grow([]byte(nil), n)
}

// put copies b to buf[off:] and returns the copy, its capacity its length
// (the last piece of an allocation is given the rest), and the new offset.
// A nil b stays nil; an empty one gives an empty, non-nil copy.
func put(buf []byte, off int, b []byte) ([]byte, int) {
	if b == nil {
		return nil, off
	}
	end := off + len(b)
	v := buf[off:end:end]
	copy(v, b)
	return v, end
}

// putBytea decodes a bytea's hex text to buf[off:] like put.
func putBytea(buf []byte, off int, b []byte) ([]byte, int, error) {
	end := off + hex.DecodedLen(len(b)-2)
	v := buf[off:end:end]
	if _, err := hex.Decode(v, b[2:]); err != nil {
		return nil, off, fmt.Errorf("bytea value: %w", err)
	}
	return v, end, nil
}

var errByteaFormat = errors.New("bytea value is not in hex format (bytea_output = 'hex' is required)")

func isHexBytea(b []byte) bool { return len(b) >= 2 && b[0] == '\\' && b[1] == 'x' }

// decodedLen is the bytes a text or NULL column takes once copied.
func decodedLen(c pgoutput.TupleCol, bytea bool) int {
	if c.Kind != pgoutput.KindText {
		return 0
	}
	if bytea {
		return hex.DecodedLen(len(c.Data) - 2)
	}
	return len(c.Data)
}

func kindName(k byte) string {
	switch k {
	case pgoutput.KindNull:
		return "NULL"
	case pgoutput.KindUnchanged:
		return "an unchanged TOAST value (not sent)"
	case pgoutput.KindBinary:
		return "in binary format"
	}
	return "text"
}

// giveRest extends the capacity of the last non-nil slice of pieces, which
// ends at off in buf, to the end of buf: the allocator's slack is counted
// with it.
func giveRest(buf []byte, off int, pieces ...*[]byte) {
	for i := len(pieces) - 1; i >= 0; i-- {
		if p := pieces[i]; p != nil && *p != nil {
			*p = buf[off-len(*p) : off : cap(buf)]
			return
		}
	}
}
