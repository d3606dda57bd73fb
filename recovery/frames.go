package recovery

import (
	"encoding/binary"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// frames builds the pgoutput messages pgoutput would have sent for the
// recovered rows, so that they go through the decoder the stream's rows go
// through: the same mapping, topics, keys, headers and poison reasons. Each
// row is one transaction at a position of its own (1, 2, ...), which the
// sink's acknowledgement tracker counts; it is never confirmed on a slot.
// A message is valid until the next one is built.
type frames struct{ buf []byte }

// pgEpoch is PostgreSQL's epoch (2000-01-01) in Unix microseconds.
const pgEpoch = 946684800000000

func pgMicros(t time.Time) uint64 { return uint64(t.UnixMicro() - pgEpoch) }

func (f *frames) u8(v byte)    { f.buf = append(f.buf, v) }
func (f *frames) u16(v uint16) { f.buf = binary.BigEndian.AppendUint16(f.buf, v) }
func (f *frames) u32(v uint32) { f.buf = binary.BigEndian.AppendUint32(f.buf, v) }
func (f *frames) u64(v uint64) { f.buf = binary.BigEndian.AppendUint64(f.buf, v) }
func (f *frames) str(s string) { f.buf = append(append(f.buf, s...), 0) }

// relation is a Relation message of rel.
func (f *frames) relation(rel pgoutput.Relation) []byte {
	f.buf = f.buf[:0]
	f.u8(pgoutput.KindRelation)
	f.u32(rel.ID)
	f.str(rel.Namespace)
	f.str(rel.Name)
	f.u8('d')
	f.u16(uint16(len(rel.Columns)))
	for _, c := range rel.Columns {
		f.u8(0)
		f.str(c.Name)
		f.u32(c.TypeOID)
		f.u32(uint32(c.TypeMod))
	}
	return f.buf
}

// begin is a Begin message of the transaction at lsn.
func (f *frames) begin(lsn pglogrepl.LSN, at time.Time, xid uint32) []byte {
	f.buf = f.buf[:0]
	f.u8(pgoutput.KindBegin)
	f.u64(uint64(lsn))
	f.u64(pgMicros(at))
	f.u32(xid)
	return f.buf
}

// insert is an Insert message of a row of relation id; a nil value is NULL.
func (f *frames) insert(id uint32, vals [][]byte) []byte {
	f.buf = f.buf[:0]
	f.u8(pgoutput.KindInsert)
	f.u32(id)
	f.u8('N')
	f.u16(uint16(len(vals)))
	for _, v := range vals {
		if v == nil {
			f.u8(pgoutput.KindNull)
			continue
		}
		f.u8(pgoutput.KindText)
		f.u32(uint32(len(v)))
		f.buf = append(f.buf, v...)
	}
	return f.buf
}

// commit is a Commit message of the transaction at lsn.
func (f *frames) commit(lsn pglogrepl.LSN, at time.Time) []byte {
	f.buf = f.buf[:0]
	f.u8(pgoutput.KindCommit)
	f.u8(0)
	f.u64(uint64(lsn))
	f.u64(uint64(lsn))
	f.u64(pgMicros(at))
	return f.buf
}
