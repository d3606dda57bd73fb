package pgoutput

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// Message kinds: the first byte of each message.
const (
	KindBegin          = 'B'
	KindCommit         = 'C'
	KindRelation       = 'R'
	KindInsert         = 'I'
	KindUpdate         = 'U'
	KindDelete         = 'D'
	KindTruncate       = 'T'
	KindType           = 'Y'
	KindOrigin         = 'O'
	KindLogicalMessage = 'M'
)

// Begin starts a transaction.
type Begin struct {
	FinalLSN   pglogrepl.LSN // the LSN of the transaction's commit record
	CommitTime time.Time
	Xid        uint32
}

// ParseBegin reads a Begin message.
func ParseBegin(b []byte) (Begin, error) {
	r := reader{b: b, off: 1}
	m := Begin{
		FinalLSN:   pglogrepl.LSN(r.u64("begin final lsn")),
		CommitTime: pgTime(r.u64("begin commit time")),
		Xid:        r.u32("begin xid"),
	}
	return m, r.err
}

// Commit ends a transaction.
type Commit struct {
	Flags      byte
	CommitLSN  pglogrepl.LSN // the commit record's LSN (Begin's FinalLSN)
	EndLSN     pglogrepl.LSN // the transaction's end: the position to confirm
	CommitTime time.Time
}

// ParseCommit reads a Commit message.
func ParseCommit(b []byte) (Commit, error) {
	r := reader{b: b, off: 1}
	m := Commit{
		Flags:      r.u8("commit flags"),
		CommitLSN:  pglogrepl.LSN(r.u64("commit lsn")),
		EndLSN:     pglogrepl.LSN(r.u64("commit end lsn")),
		CommitTime: pgTime(r.u64("commit time")),
	}
	return m, r.err
}

// Column is one column of a Relation.
type Column struct {
	Key     bool // part of the replica identity
	Name    string
	TypeOID uint32
	TypeMod int32
}

// Relation describes a table before the first change to it in a session,
// and again after it changed.
type Relation struct {
	ID              uint32
	Namespace       string
	Name            string
	ReplicaIdentity byte
	Columns         []Column
}

// ParseRelation reads a Relation message.
func ParseRelation(b []byte) (Relation, error) {
	r := reader{b: b, off: 1}
	m := Relation{
		ID:        r.u32("relation id"),
		Namespace: r.str("relation namespace"),
		Name:      r.str("relation name"),
	}
	m.ReplicaIdentity = r.u8("relation replica identity")
	n := int(r.u16("relation column count"))
	if r.err == nil && n > (len(b)-r.off)/10 {
		// Each column takes at least 10 bytes; refuse absurd counts before allocating.
		r.fail("relation columns")
	}
	if r.err != nil {
		return m, r.err
	}
	m.Columns = make([]Column, n)
	for i := range m.Columns {
		c := &m.Columns[i]
		c.Key = r.u8("column flags")&1 == 1
		c.Name = r.str("column name")
		c.TypeOID = r.u32("column type")
		c.TypeMod = int32(r.u32("column type modifier"))
	}
	return m, r.err
}

// Tuple column kinds, as pgoutput sends them.
const (
	KindNull      = 'n'
	KindUnchanged = 'u' // unchanged TOASTed value: never in an insert
	KindText      = 't'
	KindBinary    = 'b'
)

// TupleCol is one column value of a row.
type TupleCol struct {
	Kind byte
	Data []byte // aliases the message
}

// parseTuple appends TupleData's columns to cols and returns it.
func parseTuple(r *reader, cols []TupleCol) []TupleCol {
	start := len(cols)
	n := int(r.u16("tuple column count"))
	if r.err != nil {
		return cols[:start]
	}
	if n > len(r.b)-r.off {
		r.fail("tuple columns")
		return cols[:start]
	}
	for i := 0; i < n; i++ {
		kind := r.u8("tuple column kind")
		var data []byte
		switch kind {
		case KindText, KindBinary:
			l := r.u32("tuple column length")
			if uint64(l) > uint64(len(r.b)) {
				r.fail("tuple column data")
			}
			data = r.bytes(int(l), "tuple column data")
		case KindNull, KindUnchanged:
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unknown tuple column kind %q at offset %d", kind, r.off-1)
			}
		}
		if r.err != nil {
			return cols[:start]
		}
		cols = append(cols, TupleCol{Kind: kind, Data: data})
	}
	return cols
}

// Insert is one inserted row.
type Insert struct {
	RelationID uint32
	New        []TupleCol
}

// ParseInsert reads an Insert message, its columns into buf (reused: New
// is buf[:0] with the row appended).
func ParseInsert(b []byte, buf []TupleCol) (Insert, error) {
	r := reader{b: b, off: 1}
	m := Insert{RelationID: r.u32("insert relation id")}
	if t := r.u8("insert tuple type"); r.err == nil && t != 'N' {
		return m, fmt.Errorf("insert tuple type %q, want 'N'", t)
	}
	m.New = parseTuple(&r, buf[:0])
	return m, r.err
}

// Update is one updated row: the old key ('K') or row ('O') when the
// replica identity sends one (OldKind 0 otherwise), and the new row.
type Update struct {
	RelationID uint32
	OldKind    byte
	Old, New   []TupleCol
}

// ParseUpdate reads an Update message, both tuples into buf (reused).
func ParseUpdate(b []byte, buf []TupleCol) (Update, error) {
	r := reader{b: b, off: 1}
	m := Update{RelationID: r.u32("relation id")}
	cols := buf[:0]
	t := r.u8("tuple type")
	if t == 'K' || t == 'O' {
		m.OldKind = t
		cols = parseTuple(&r, cols)
		t = r.u8("tuple type")
	}
	if r.err == nil && t != 'N' {
		return m, fmt.Errorf("U message: tuple type %q, want %q", t, 'N')
	}
	k := len(cols)
	cols = parseTuple(&r, cols)
	m.Old, m.New = cols[:k:k], cols[k:]
	return m, r.err
}

// Delete is one deleted row: its key ('K') or whole row ('O').
type Delete struct {
	RelationID uint32
	OldKind    byte
	Old        []TupleCol
}

// ParseDelete reads a Delete message, the tuple into buf (reused).
func ParseDelete(b []byte, buf []TupleCol) (Delete, error) {
	r := reader{b: b, off: 1}
	m := Delete{RelationID: r.u32("relation id")}
	t := r.u8("tuple type")
	want := byte('O')
	if t == 'K' {
		want = 'K'
	}
	if r.err == nil && t != want {
		return m, fmt.Errorf("D message: tuple type %q, want %q", t, want)
	}
	m.OldKind = t
	m.Old = parseTuple(&r, buf[:0])
	return m, r.err
}

// Truncate empties one or more relations.
type Truncate struct {
	Options     byte // 1: CASCADE, 2: RESTART IDENTITY
	RelationIDs []uint32
}

// ParseTruncate reads a Truncate message.
func ParseTruncate(b []byte) (Truncate, error) {
	r := reader{b: b, off: 1}
	n := r.u32("truncate relation count")
	m := Truncate{Options: r.u8("truncate options")}
	if r.err == nil && uint64(n) > uint64(len(b)-r.off)/4 {
		// Refuse absurd counts before allocating.
		r.fail("truncate relation id")
	}
	if r.err != nil {
		return m, r.err
	}
	m.RelationIDs = make([]uint32, n)
	for i := range m.RelationIDs {
		m.RelationIDs[i] = r.u32("truncate relation id")
	}
	return m, r.err
}

// Type describes a data type.
type Type struct {
	ID        uint32
	Namespace string
	Name      string
}

// ParseType reads a Type message.
func ParseType(b []byte) (Type, error) {
	r := reader{b: b, off: 1}
	m := Type{ID: r.u32("type oid"), Namespace: r.str("type namespace"), Name: r.str("type name")}
	return m, r.err
}

// Origin names the origin of a transaction replicated from elsewhere.
type Origin struct {
	CommitLSN pglogrepl.LSN
	Name      string
}

// ParseOrigin reads an Origin message.
func ParseOrigin(b []byte) (Origin, error) {
	r := reader{b: b, off: 1}
	m := Origin{CommitLSN: pglogrepl.LSN(r.u64("origin lsn")), Name: r.str("origin name")}
	return m, r.err
}

// LogicalMessage is a pg_logical_emit_message message.
type LogicalMessage struct {
	Flags   byte // 1: transactional
	LSN     pglogrepl.LSN
	Prefix  []byte // aliases the message: no copy per message
	Content []byte // aliases the message
}

// ParseLogicalMessage reads a logical decoding message.
func ParseLogicalMessage(b []byte) (LogicalMessage, error) {
	r := reader{b: b, off: 1}
	m := LogicalMessage{Flags: r.u8("message flags"), LSN: pglogrepl.LSN(r.u64("message lsn")), Prefix: r.strBytes("message prefix")}
	m.Content = r.bytes(int(r.u32("message length")), "message content")
	return m, r.err
}
