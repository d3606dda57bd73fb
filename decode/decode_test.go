package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// PostgreSQL type OIDs (pg_type.oid), written out here rather than taken
// from the package so that a wrong constant there fails a test.
const (
	pgBool    = 16
	pgBytea   = 17
	pgInt8    = 20
	pgInt4    = 23
	pgText    = 25
	pgJSON    = 114
	pgVarchar = 1043
	pgUUID    = 2950
	pgJSONB   = 3802
)

// testEpoch is 2000-01-01 UTC, the origin of PostgreSQL timestamps.
var testEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// frame builds one pgoutput message byte by byte, big-endian as on the wire.
type frame struct{ b []byte }

func newFrame(typ byte) *frame { return &frame{b: []byte{typ}} }

func (f *frame) u8(v byte) *frame    { f.b = append(f.b, v); return f }
func (f *frame) u16(v uint16) *frame { f.b = binary.BigEndian.AppendUint16(f.b, v); return f }
func (f *frame) u32(v uint32) *frame { f.b = binary.BigEndian.AppendUint32(f.b, v); return f }
func (f *frame) u64(v uint64) *frame { f.b = binary.BigEndian.AppendUint64(f.b, v); return f }
func (f *frame) raw(s string) *frame { f.b = append(f.b, s...); return f }

// str writes a NUL-terminated string.
func (f *frame) str(s string) *frame { return f.raw(s).u8(0) }

// tuple writes TupleData: Int16 column count, then per column a kind byte
// and, for 't' and 'b', Int32 length and the bytes.
func (f *frame) tuple(vals []val) *frame {
	f.u16(uint16(len(vals)))
	for _, v := range vals {
		f.u8(v.kind)
		if v.kind == 't' || v.kind == 'b' {
			f.u32(uint32(len(v.data))).raw(v.data)
		}
	}
	return f
}

func micros(t time.Time) uint64 { return uint64(t.Sub(testEpoch) / time.Microsecond) }

// msgBegin is 'B': Int64 final LSN, Int64 commit time, Int32 xid.
func msgBegin(finalLSN pglogrepl.LSN, commitTime time.Time, xid uint32) []byte {
	return newFrame('B').u64(uint64(finalLSN)).u64(micros(commitTime)).u32(xid).b
}

// msgCommit is 'C': Int8 flags, Int64 commit LSN, Int64 end LSN, Int64 commit time.
func msgCommit(commitLSN, endLSN pglogrepl.LSN, commitTime time.Time) []byte {
	return newFrame('C').u8(0).u64(uint64(commitLSN)).u64(uint64(endLSN)).u64(micros(commitTime)).b
}

// col is one column of a Relation message.
type col struct {
	name string
	oid  uint32
	key  bool
}

// msgRelation is 'R': Int32 id, String namespace, String name, Int8 replica
// identity, Int16 column count, per column Int8 flags, String name, Int32
// type OID, Int32 type modifier.
func msgRelation(id uint32, ns, name string, cols ...col) []byte {
	f := newFrame('R').u32(id).str(ns).str(name).u8('d').u16(uint16(len(cols)))
	for _, c := range cols {
		var flags byte
		if c.key {
			flags = 1
		}
		f.u8(flags).str(c.name).u32(c.oid).u32(0xFFFFFFFF) // typmod -1
	}
	return f.b
}

// val is one TupleData column.
type val struct {
	kind byte // 'n', 'u', 't' or 'b'
	data string
}

func text(s string) val { return val{kind: 't', data: s} }
func null() val         { return val{kind: 'n'} }
func unchanged() val    { return val{kind: 'u'} }
func binaryVal(s string) val {
	return val{kind: 'b', data: s}
}

// msgInsert is 'I': Int32 relation id, Byte 'N', TupleData.
func msgInsert(relid uint32, vals ...val) []byte {
	return newFrame('I').u32(relid).u8('N').tuple(vals).b
}

// msgUpdate is 'U': Int32 relation id, Byte 'N', TupleData (no old tuple).
func msgUpdate(relid uint32, vals ...val) []byte {
	return newFrame('U').u32(relid).u8('N').tuple(vals).b
}

// msgUpdateKey is 'U' with the old key: Byte 'K', TupleData, Byte 'N', TupleData.
func msgUpdateKey(relid uint32, key, vals []val) []byte {
	return newFrame('U').u32(relid).u8('K').tuple(key).u8('N').tuple(vals).b
}

// msgDelete is 'D': Int32 relation id, Byte 'K', TupleData of the key.
func msgDelete(relid uint32, key ...val) []byte {
	return newFrame('D').u32(relid).u8('K').tuple(key).b
}

// msgTruncate is 'T': Int32 relation count, Int8 options, Int32 relation ids.
func msgTruncate(options byte, relids ...uint32) []byte {
	f := newFrame('T').u32(uint32(len(relids))).u8(options)
	for _, id := range relids {
		f.u32(id)
	}
	return f.b
}

// msgType is 'Y': Int32 type OID, String namespace, String name.
func msgType(oid uint32, ns, name string) []byte {
	return newFrame('Y').u32(oid).str(ns).str(name).b
}

// msgOrigin is 'O': Int64 origin commit LSN, String origin name.
func msgOrigin(lsn pglogrepl.LSN, name string) []byte {
	return newFrame('O').u64(uint64(lsn)).str(name).b
}

// msgMessage is 'M' (transactional): Int8 flags, Int64 LSN, String prefix,
// Int32 length, content.
func msgMessage(lsn pglogrepl.LSN, prefix, content string) []byte {
	return newFrame('M').u8(1).u64(uint64(lsn)).str(prefix).u32(uint32(len(content))).raw(content).b
}

const (
	outboxRelID = 16385
	otherRelID  = 16390
	commitLSN   = pglogrepl.LSN(0x16_B374D848)
	endLSN      = pglogrepl.LSN(0x16_B374D878)
	xid         = 771
	eventUUID   = "8a1e7ad2-4a6e-4c1b-9a61-3f0c3a7e1f55"
)

var commitTime = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

// outboxCols is Debezium's outbox table with the given payload type.
func outboxCols(payloadOID uint32) []col {
	return []col{
		{name: "id", oid: pgUUID, key: true},
		{name: "aggregatetype", oid: pgText},
		{name: "aggregateid", oid: pgText},
		{name: "type", oid: pgText},
		{name: "payload", oid: payloadOID},
	}
}

func outboxRelation(payloadOID uint32) []byte {
	return msgRelation(outboxRelID, "public", "outbox", outboxCols(payloadOID)...)
}

// outboxRow is an insert into the default outbox relation.
func outboxRow(id, aggType, aggID, typ string, payload val) []byte {
	return msgInsert(outboxRelID, text(id), text(aggType), text(aggID), text(typ), payload)
}

func newDecoder(t testing.TB, cfg Config) *Decoder {
	t.Helper()
	log := zap.NewNop()
	if tt, ok := t.(*testing.T); ok {
		log = zaptest.NewLogger(tt)
	}
	d, err := New(cfg, log)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return d
}

// feed decodes msgs in order, collecting every Tx part, and stops at the
// first error.
func feed(d *Decoder, msgs ...[]byte) ([]*Tx, error) {
	var txs []*Tx
	for i, m := range msgs {
		tx, err := d.Decode(m)
		if err != nil {
			return txs, fmt.Errorf("message %d (%q): %w", i, m[:min(len(m), 1)], err)
		}
		if tx != nil {
			txs = append(txs, tx)
		}
	}
	return txs, nil
}

func mustFeed(t *testing.T, d *Decoder, msgs ...[]byte) []*Tx {
	t.Helper()
	txs, err := feed(d, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return txs
}

// oneTx wraps msgs in Begin/Commit and returns the single Tx they make.
func oneTx(t *testing.T, d *Decoder, msgs ...[]byte) *Tx {
	t.Helper()
	all := append([][]byte{msgBegin(commitLSN, commitTime, xid)}, msgs...)
	all = append(all, msgCommit(commitLSN, endLSN, commitTime))
	txs := mustFeed(t, d, all...)
	if len(txs) != 1 {
		t.Fatalf("got %d Tx parts, want 1", len(txs))
	}
	return txs[0]
}

func TestFrameBuildersMatchPglogrepl(t *testing.T) {
	// The builders are the ground truth of every other test here, so check
	// them against an independent parser first.
	tests := []struct {
		name  string
		frame []byte
		want  pglogrepl.Message
	}{
		{
			name:  "begin",
			frame: msgBegin(commitLSN, commitTime, xid),
			want:  &pglogrepl.BeginMessage{FinalLSN: commitLSN, CommitTime: commitTime, Xid: xid},
		},
		{
			name:  "commit",
			frame: msgCommit(commitLSN, endLSN, commitTime),
			want:  &pglogrepl.CommitMessage{CommitLSN: commitLSN, TransactionEndLSN: endLSN, CommitTime: commitTime},
		},
		{
			name:  "relation",
			frame: msgRelation(outboxRelID, "public", "outbox", col{name: "id", oid: pgUUID, key: true}, col{name: "payload", oid: pgJSONB}),
			want: &pglogrepl.RelationMessage{
				RelationID: outboxRelID, Namespace: "public", RelationName: "outbox", ReplicaIdentity: 'd', ColumnNum: 2,
				Columns: []*pglogrepl.RelationMessageColumn{
					{Flags: 1, Name: "id", DataType: pgUUID, TypeModifier: -1},
					{Flags: 0, Name: "payload", DataType: pgJSONB, TypeModifier: -1},
				},
			},
		},
		{
			name:  "insert",
			frame: msgInsert(outboxRelID, text("a"), null(), unchanged()),
			want: &pglogrepl.InsertMessage{
				RelationID: outboxRelID,
				Tuple: &pglogrepl.TupleData{ColumnNum: 3, Columns: []*pglogrepl.TupleDataColumn{
					{DataType: 't', Length: 1, Data: []byte("a")}, {DataType: 'n'}, {DataType: 'u'},
				}},
			},
		},
		{
			name:  "delete",
			frame: msgDelete(outboxRelID, text("k")),
			want: &pglogrepl.DeleteMessage{
				RelationID: outboxRelID, OldTupleType: 'K',
				OldTuple: &pglogrepl.TupleData{ColumnNum: 1, Columns: []*pglogrepl.TupleDataColumn{{DataType: 't', Length: 1, Data: []byte("k")}}},
			},
		},
		{
			name:  "truncate",
			frame: msgTruncate(1, outboxRelID, otherRelID),
			want:  &pglogrepl.TruncateMessage{RelationNum: 2, Option: 1, RelationIDs: []uint32{outboxRelID, otherRelID}},
		},
		{
			name:  "type",
			frame: msgType(70000, "public", "mood"),
			want:  &pglogrepl.TypeMessage{DataType: 70000, Namespace: "public", Name: "mood"},
		},
		{
			name:  "origin",
			frame: msgOrigin(commitLSN, "upstream"),
			want:  &pglogrepl.OriginMessage{CommitLSN: commitLSN, Name: "upstream"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pglogrepl.Parse(tt.frame)
			if err != nil {
				t.Fatalf("pglogrepl.Parse: %v", err)
			}
			// The embedded base message carries only the type byte.
			tt.want.(interface{ SetType(pglogrepl.MessageType) }).SetType(pglogrepl.MessageType(tt.frame[0]))
			// pglogrepl gives local times; compare instants, then the rest.
			switch m := got.(type) {
			case *pglogrepl.BeginMessage:
				if !m.CommitTime.Equal(commitTime) {
					t.Errorf("CommitTime = %v, want %v", m.CommitTime, commitTime)
				}
				m.CommitTime = commitTime
			case *pglogrepl.CommitMessage:
				if !m.CommitTime.Equal(commitTime) {
					t.Errorf("CommitTime = %v, want %v", m.CommitTime, commitTime)
				}
				m.CommitTime = commitTime
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("pglogrepl.Parse =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestDecodeTransaction(t *testing.T) {
	d := newDecoder(t, Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}})
	msgs := [][]byte{
		msgBegin(commitLSN, commitTime, xid),
		msgOrigin(0x1_00000000, "upstream"),
		msgType(70000, "public", "mood"),
		outboxRelation(pgJSONB),
		outboxRow(eventUUID, "order", "o-17", "OrderCreated", text(`{"total": 12}`)),
		outboxRow("0b9e3b64-0b9f-4c6e-a1f4-1f1cfe8f2b33", "customer", "c-4", "CustomerMoved", null()),
	}
	for i, m := range msgs {
		tx, err := d.Decode(m)
		if err != nil || tx != nil {
			t.Fatalf("Decode(message %d) = %v, %v; want nil, nil before the commit", i, tx, err)
		}
		if !d.InTx() {
			t.Fatalf("InTx() = false after message %d", i)
		}
	}
	tx, err := d.Decode(msgCommit(commitLSN, endLSN, commitTime))
	if err != nil {
		t.Fatalf("Decode(commit): %v", err)
	}
	if d.InTx() {
		t.Error("InTx() = true after the commit")
	}
	want := &Tx{
		Xid:        xid,
		CommitLSN:  commitLSN,
		EndLSN:     endLSN,
		CommitTime: commitTime,
		First:      true,
		Last:       true,
		Events: []Event{
			{
				Table:   "public.outbox",
				Topic:   "outbox.event.order",
				Key:     []byte("o-17"),
				Value:   []byte(`{"total": 12}`),
				ID:      []byte(eventUUID),
				Headers: []Header{{Key: "eventType", Value: []byte("OrderCreated")}},
			},
			{
				Table:   "public.outbox",
				Topic:   "outbox.event.customer",
				Key:     []byte("c-4"),
				Value:   nil,
				ID:      []byte("0b9e3b64-0b9f-4c6e-a1f4-1f1cfe8f2b33"),
				Headers: []Header{{Key: "eventType", Value: []byte("CustomerMoved")}},
			},
		},
	}
	if !tx.CommitTime.Equal(want.CommitTime) {
		t.Errorf("CommitTime = %v, want %v", tx.CommitTime, want.CommitTime)
	}
	tx.CommitTime = want.CommitTime // compare the rest without the location
	if !reflect.DeepEqual(tx, want) {
		t.Errorf("Tx =\n%+v\nwant\n%+v", tx, want)
	}
	if want := (Stats{Transactions: 1, Inserts: 2}); d.Stats != want {
		t.Errorf("Stats = %+v, want %+v", d.Stats, want)
	}

	// The relation cache survives the transaction.
	next := oneTx(t, d, outboxRow(eventUUID, "order", "o-18", "OrderPaid", text(`{}`)))
	if len(next.Events) != 1 || next.Events[0].Err != nil || string(next.Events[0].Key) != "o-18" {
		t.Errorf("next transaction events = %+v, want one event keyed o-18", next.Events)
	}
}

func TestDecodeEvent(t *testing.T) {
	long := strings.Repeat("x", 249-len("outbox.event."))
	tests := []struct {
		name    string
		cfg     Config
		ns      string // default "public"
		table   string // default "outbox"
		cols    []col  // default outboxCols(pgJSONB)
		row     []val
		want    Event // Table is filled in; ignored when wantErr is set
		wantErr error
	}{
		{
			name: "jsonb payload kept as text",
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{"a": [1, 2]}`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{"a": [1, 2]}`), ID: []byte(eventUUID)},
		},
		{
			name: "json payload kept as text",
			cols: outboxCols(pgJSON),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{"a":1,  "a":2}`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{"a":1,  "a":2}`), ID: []byte(eventUUID)},
		},
		{
			name: "text payload kept as text",
			cols: outboxCols(pgText),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`\x41 is not decoded`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`\x41 is not decoded`), ID: []byte(eventUUID)},
		},
		{
			name: "varchar payload kept as text",
			cols: outboxCols(pgVarchar),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text("hello")},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte("hello"), ID: []byte(eventUUID)},
		},
		{
			name: "empty text payload is an empty value, not null",
			cols: outboxCols(pgText),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text("")},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte{}, ID: []byte(eventUUID)},
		},
		{
			name: "NULL payload gives a nil value",
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderDeleted"), null()},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: nil, ID: []byte(eventUUID)},
		},
		{
			name: "bytea payload decoded to raw bytes",
			cols: outboxCols(pgBytea),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`\x00ff7b0a`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte{0x00, 0xff, 0x7b, 0x0a}, ID: []byte(eventUUID)},
		},
		{
			name: "bytea payload upper-case hex",
			cols: outboxCols(pgBytea),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`\xDEADBEEF`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte{0xde, 0xad, 0xbe, 0xef}, ID: []byte(eventUUID)},
		},
		{
			name: "empty bytea payload is an empty value",
			cols: outboxCols(pgBytea),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`\x`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte{}, ID: []byte(eventUUID)},
		},
		{
			name: "NULL bytea payload gives a nil value",
			cols: outboxCols(pgBytea),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), null()},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: nil, ID: []byte(eventUUID)},
		},
		{
			name: "bigint id and key",
			cols: []col{{name: "id", oid: pgInt8, key: true}, {name: "aggregatetype", oid: pgText}, {name: "aggregateid", oid: pgInt8}, {name: "type", oid: pgText}, {name: "payload", oid: pgJSONB}},
			row:  []val{text("9223372036854775807"), text("order"), text("-42"), text("OrderCreated"), text(`{}`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("-42"), Value: []byte(`{}`), ID: []byte("9223372036854775807")},
		},
		{
			name: "uuid key, varchar type column",
			cols: []col{{name: "id", oid: pgUUID, key: true}, {name: "aggregatetype", oid: pgVarchar}, {name: "aggregateid", oid: pgUUID}, {name: "type", oid: pgVarchar}, {name: "payload", oid: pgJSONB}},
			row:  []val{text(eventUUID), text("order"), text("3f0c3a7e-1f55-4a6e-8a1e-7ad24c1b9a61"), text("OrderCreated"), text(`{}`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("3f0c3a7e-1f55-4a6e-8a1e-7ad24c1b9a61"), Value: []byte(`{}`), ID: []byte(eventUUID)},
		},
		{
			name: "header columns",
			cfg:  Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}, {Column: "aggregatetype", Header: "aggregateType"}}},
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)},
			want: Event{
				Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{}`), ID: []byte(eventUUID),
				Headers: []Header{{Key: "eventType", Value: []byte("OrderCreated")}, {Key: "aggregateType", Value: []byte("order")}},
			},
		},
		{
			name: "NULL header column gives a header with a nil value",
			cfg:  Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}},
			row:  []val{text(eventUUID), text("order"), text("o-1"), null(), text(`{}`)},
			want: Event{
				Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{}`), ID: []byte(eventUUID),
				Headers: []Header{{Key: "eventType", Value: nil}},
			},
		},
		{
			name: "bytea header column decoded",
			cfg:  Config{HeaderColumns: []HeaderColumn{{Column: "trace", Header: "traceparent"}}},
			cols: append(outboxCols(pgJSONB), col{name: "trace", oid: pgBytea}),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`), text(`\x0102`)},
			want: Event{
				Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{}`), ID: []byte(eventUUID),
				Headers: []Header{{Key: "traceparent", Value: []byte{1, 2}}},
			},
		},
		{
			name:  "custom table, columns and template",
			cfg:   Config{Tables: []string{"app.events"}, IDColumn: "event_id", KeyColumn: "k", PayloadColumn: "body", Topic: "events.${kind}.${version}"},
			ns:    "app",
			table: "events",
			cols:  []col{{name: "body", oid: pgText}, {name: "kind", oid: pgText}, {name: "k", oid: pgText}, {name: "event_id", oid: pgInt8}, {name: "version", oid: pgInt4}},
			row:   []val{text("b"), text("user"), text("u-9"), text("12"), text("3")},
			want:  Event{Topic: "events.user.3", Key: []byte("u-9"), Value: []byte("b"), ID: []byte("12")},
		},
		{
			name: "template without columns",
			cfg:  Config{Topic: "all-events"},
			cols: []col{{name: "id", oid: pgUUID}, {name: "aggregateid", oid: pgText}, {name: "payload", oid: pgJSONB}},
			row:  []val{text(eventUUID), text("o-1"), text(`{}`)},
			want: Event{Topic: "all-events", Key: []byte("o-1"), Value: []byte(`{}`), ID: []byte(eventUUID)},
		},
		{
			name: "topic of 249 characters",
			row:  []val{text(eventUUID), text(long), text("o-1"), text("OrderCreated"), text(`{}`)},
			want: Event{Topic: "outbox.event." + long, Key: []byte("o-1"), Value: []byte(`{}`), ID: []byte(eventUUID)},
		},

		// Poison rows: an Event with Err and Row.
		{
			name:    "NULL key",
			row:     []val{text(eventUUID), text("order"), null(), text("OrderCreated"), text(`{}`)},
			wantErr: ErrNullKey,
		},
		{
			name:    "empty key",
			row:     []val{text(eventUUID), text("order"), text(""), text("OrderCreated"), text(`{}`)},
			wantErr: ErrEmptyKey,
		},
		{
			name:    "NULL id",
			row:     []val{null(), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrNullID,
		},
		{
			name:    "topic with a space",
			row:     []val{text(eventUUID), text("bad name"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrInvalidTopic,
		},
		{
			name:    "topic with a slash",
			row:     []val{text(eventUUID), text("a/b"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrInvalidTopic,
		},
		{
			name:    "topic of 250 characters",
			row:     []val{text(eventUUID), text(long + "x"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrInvalidTopic,
		},
		{
			name:    "NULL topic column",
			row:     []val{text(eventUUID), null(), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrInvalidTopic,
		},
		{
			name:    "template giving '..'",
			cfg:     Config{Topic: "${aggregatetype}"},
			row:     []val{text(eventUUID), text(".."), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrInvalidTopic,
		},
		{
			name:    "missing payload column",
			cols:    []col{{name: "id", oid: pgUUID}, {name: "aggregatetype", oid: pgText}, {name: "aggregateid", oid: pgText}, {name: "type", oid: pgText}, {name: "body", oid: pgJSONB}},
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrMissingColumn,
		},
		{
			name:    "missing topic column",
			cols:    []col{{name: "id", oid: pgUUID}, {name: "aggregateid", oid: pgText}, {name: "payload", oid: pgJSONB}},
			row:     []val{text(eventUUID), text("o-1"), text(`{}`)},
			wantErr: ErrMissingColumn,
		},
		{
			name:    "missing header column",
			cfg:     Config{HeaderColumns: []HeaderColumn{{Column: "trace", Header: "traceparent"}}},
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrMissingColumn,
		},
		{
			name:    "unsupported payload type int4",
			cols:    outboxCols(pgInt4),
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text("7")},
			wantErr: ErrUnsupportedType,
		},
		{
			name:    "unsupported id type bool",
			cols:    []col{{name: "id", oid: pgBool}, {name: "aggregatetype", oid: pgText}, {name: "aggregateid", oid: pgText}, {name: "type", oid: pgText}, {name: "payload", oid: pgJSONB}},
			row:     []val{text("t"), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrUnsupportedType,
		},
		{
			name:    "unsupported key type jsonb",
			cols:    []col{{name: "id", oid: pgUUID}, {name: "aggregatetype", oid: pgText}, {name: "aggregateid", oid: pgJSONB}, {name: "type", oid: pgText}, {name: "payload", oid: pgJSONB}},
			row:     []val{text(eventUUID), text("order"), text(`"o-1"`), text("OrderCreated"), text(`{}`)},
			wantErr: ErrUnsupportedType,
		},
		{
			name:    "unchanged TOAST payload in an insert",
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), unchanged()},
			wantErr: ErrBadValue,
		},
		{
			name:    "unchanged TOAST id in an insert",
			row:     []val{unchanged(), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrBadValue,
		},
		{
			name:    "unchanged TOAST key in an insert",
			row:     []val{text(eventUUID), text("order"), unchanged(), text("OrderCreated"), text(`{}`)},
			wantErr: ErrBadValue,
		},
		{
			name:    "empty id",
			cols:    []col{{name: "id", oid: pgText}, {name: "aggregatetype", oid: pgText}, {name: "aggregateid", oid: pgText}, {name: "type", oid: pgText}, {name: "payload", oid: pgJSONB}},
			row:     []val{text(""), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)},
			wantErr: ErrNullID,
		},
		{
			name:    "unchanged TOAST header column in an insert",
			cfg:     Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}},
			row:     []val{text(eventUUID), text("order"), text("o-1"), unchanged(), text(`{}`)},
			wantErr: ErrBadValue,
		},
		{
			name:    "binary-format payload",
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), binaryVal("\x01{}")},
			wantErr: ErrBadValue,
		},
		{
			name:    "bytea payload in escape format",
			cols:    outboxCols(pgBytea),
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`abc\000`)},
			wantErr: ErrBadValue,
		},
		{
			name:    "bytea payload with odd hex",
			cols:    outboxCols(pgBytea),
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`\x0`)},
			wantErr: ErrBadValue,
		},
		{
			name:    "bytea payload with a non-hex digit",
			cols:    outboxCols(pgBytea),
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`\x0g`)},
			wantErr: ErrBadValue,
		},
		{
			name:    "bytea header column not hex",
			cfg:     Config{HeaderColumns: []HeaderColumn{{Column: "trace", Header: "traceparent"}}},
			cols:    append(outboxCols(pgJSONB), col{name: "trace", oid: pgBytea}),
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`), text("zz")},
			wantErr: ErrBadValue,
		},
		{
			name:    "row with fewer columns than the relation",
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated")},
			wantErr: ErrBadValue,
		},
		{
			name:    "row with more columns than the relation",
			row:     []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`), text("extra")},
			wantErr: ErrBadValue,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, table, cols := tt.ns, tt.table, tt.cols
			if ns == "" {
				ns = "public"
			}
			if table == "" {
				table = "outbox"
			}
			if cols == nil {
				cols = outboxCols(pgJSONB)
			}
			d := newDecoder(t, tt.cfg)
			ins := msgInsert(outboxRelID, tt.row...)
			if schemaReason(tt.wantErr) {
				wantSchemaChanged(t, d, tt.wantErr, msgRelation(outboxRelID, ns, table, cols...))
				return
			}
			// The row goes in twice: the second time the topic (or topic
			// error) comes from the relation's cache.
			tx := oneTx(t, d, msgRelation(outboxRelID, ns, table, cols...), ins, ins)
			if len(tx.Events) != 2 {
				t.Fatalf("got %d events, want 2", len(tx.Events))
			}
			if d.Stats.Inserts != 2 {
				t.Errorf("Stats.Inserts = %d, want 2", d.Stats.Inserts)
			}
			for i, ev := range tx.Events {
				if ev.Table != ns+"."+table {
					t.Errorf("event %d: Table = %q, want %q", i, ev.Table, ns+"."+table)
				}
				if tt.wantErr != nil {
					checkPoison(t, ev, tt.wantErr, cols, tt.row)
					continue
				}
				want := tt.want
				want.Table = ns + "." + table
				if !reflect.DeepEqual(ev, want) {
					t.Errorf("event %d =\n%s\nwant\n%s", i, fmtEvent(ev), fmtEvent(want))
				}
				if err := ValidTopic(ev.Topic); err != nil {
					t.Errorf("event %d: %v", i, err)
				}
			}
		})
	}
}

// reasonNames are the poison reasons' names as users see them in the
// walrelay.error.class header and the dead-letter metric's label.
var reasonNames = map[error]string{
	ErrNullKey: "null_key", ErrEmptyKey: "empty_key", ErrNullID: "null_id", ErrInvalidTopic: "invalid_topic",
	ErrMissingColumn: "missing_column", ErrUnsupportedType: "unsupported_type", ErrBadValue: "bad_value", ErrTooLarge: "too_large",
}

// checkPoison checks a poison event: Err wraps wantErr, Reason names it
// (the dead-letter header and metric label) and Row holds the row as
// received.
func checkPoison(t *testing.T, ev Event, wantErr error, cols []col, row []val) {
	t.Helper()
	if !errors.Is(ev.Err, wantErr) {
		t.Errorf("Err = %v, want it to wrap %v", ev.Err, wantErr)
	}
	if want := reasonNames[wantErr]; ev.Reason != want {
		t.Errorf("Reason = %q, want %q", ev.Reason, want)
	}
	if len(ev.Row) != len(row) {
		t.Fatalf("Row has %d fields, want %d: %+v", len(ev.Row), len(row), ev.Row)
	}
	for i, f := range ev.Row {
		var want Field
		if i < len(cols) {
			want.Name, want.Type = cols[i].name, cols[i].oid
		}
		want.Null = row[i].kind == 'n'
		if f.Name != want.Name || f.Type != want.Type || f.Null != want.Null || string(f.Value) != row[i].data {
			t.Errorf("Row[%d] = {%q %d %v %q}, want {%q %d %v %q}", i, f.Name, f.Type, f.Null, f.Value, want.Name, want.Type, want.Null, row[i].data)
		}
	}
}

func fmtEvent(e Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Table=%q Topic=%q Key=%q ID=%q", e.Table, e.Topic, e.Key, e.ID)
	if e.Value == nil {
		b.WriteString(" Value=nil")
	} else {
		fmt.Fprintf(&b, " Value=%q", e.Value)
	}
	for _, h := range e.Headers {
		fmt.Fprintf(&b, " Header[%s]=%q(nil=%v)", h.Key, h.Value, h.Value == nil)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " Err=%v", e.Err)
	}
	return b.String()
}

func TestDecodeIgnoresChangesThatAreNotOutboxInserts(t *testing.T) {
	ordersRel := msgRelation(otherRelID, "public", "orders", col{name: "id", oid: pgInt8, key: true}, col{name: "total", oid: pgInt4})
	outboxRel := outboxRelation(pgJSONB)
	row := []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)}
	tests := []struct {
		name string
		cfg  Config
		msgs [][]byte
		want Stats
	}{
		{
			name: "insert into another table",
			msgs: [][]byte{ordersRel, msgInsert(otherRelID, text("1"), text("12"))},
			want: Stats{Transactions: 1, OtherTables: 1},
		},
		{
			name: "table named outbox in another schema",
			msgs: [][]byte{msgRelation(outboxRelID, "app", "outbox", outboxCols(pgJSONB)...), msgInsert(outboxRelID, row...)},
			want: Stats{Transactions: 1, OtherTables: 1},
		},
		{
			name: "public.outbox when another table is configured",
			cfg:  Config{Tables: []string{"app.events"}},
			msgs: [][]byte{outboxRel, msgInsert(outboxRelID, row...)},
			want: Stats{Transactions: 1, OtherTables: 1},
		},
		{
			name: "update of the outbox",
			msgs: [][]byte{outboxRel, msgUpdate(outboxRelID, row...)},
			want: Stats{Transactions: 1, Ignored: 1},
		},
		{
			name: "update of the outbox with its old key",
			msgs: [][]byte{outboxRel, msgUpdateKey(outboxRelID, []val{text(eventUUID)}, row)},
			want: Stats{Transactions: 1, Ignored: 1},
		},
		{
			name: "delete from the outbox",
			msgs: [][]byte{outboxRel, msgDelete(outboxRelID, text(eventUUID))},
			want: Stats{Transactions: 1, Ignored: 1},
		},
		{
			name: "truncate of the outbox",
			msgs: [][]byte{outboxRel, msgTruncate(0, outboxRelID)},
			want: Stats{Transactions: 1, Ignored: 1},
		},
		{
			name: "truncate of the outbox and another table",
			msgs: [][]byte{outboxRel, ordersRel, msgTruncate(1|2, otherRelID, outboxRelID)},
			want: Stats{Transactions: 1, Ignored: 1, OtherTables: 1},
		},
		{
			name: "update and delete of another table",
			msgs: [][]byte{ordersRel, msgUpdate(otherRelID, text("1"), text("13")), msgDelete(otherRelID, text("1"))},
			want: Stats{Transactions: 1, OtherTables: 2},
		},
		{
			name: "type, origin and logical decoding messages",
			msgs: [][]byte{msgOrigin(0x1_00000000, "upstream"), msgType(70000, "public", "mood"), msgMessage(commitLSN, "walrelay", "hello")},
			want: Stats{Transactions: 1},
		},
		{
			name: "empty transaction",
			want: Stats{Transactions: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, tt.cfg)
			tx := oneTx(t, d, tt.msgs...)
			if len(tx.Events) != 0 {
				t.Errorf("got %d events, want none: %+v", len(tx.Events), tx.Events)
			}
			if !tx.First || !tx.Last || tx.EndLSN != endLSN {
				t.Errorf("Tx First=%v Last=%v EndLSN=%s, want true true %s", tx.First, tx.Last, tx.EndLSN, endLSN)
			}
			if d.Stats != tt.want {
				t.Errorf("Stats = %+v, want %+v", d.Stats, tt.want)
			}
		})
	}
}

func TestDecodeProtocolErrors(t *testing.T) {
	bg := msgBegin(commitLSN, commitTime, xid)
	rel := outboxRelation(pgJSONB)
	row := []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)}
	tests := []struct {
		name string
		msgs [][]byte // every message but the last decodes without error
	}{
		{name: "empty message", msgs: [][]byte{{}}},
		{name: "unknown relation in an insert", msgs: [][]byte{bg, msgInsert(outboxRelID, row...)}},
		{name: "unknown relation in an update", msgs: [][]byte{bg, msgUpdate(outboxRelID, row...)}},
		{name: "unknown relation in a delete", msgs: [][]byte{bg, msgDelete(outboxRelID, text(eventUUID))}},
		{name: "unknown relation in a truncate", msgs: [][]byte{bg, rel, msgTruncate(0, outboxRelID, otherRelID)}},
		{name: "relation id of another relation", msgs: [][]byte{bg, rel, msgInsert(outboxRelID+1, row...)}},
		{name: "commit without begin", msgs: [][]byte{msgCommit(commitLSN, endLSN, commitTime)}},
		{name: "second commit", msgs: [][]byte{bg, msgCommit(commitLSN, endLSN, commitTime), msgCommit(commitLSN, endLSN, commitTime)}},
		{name: "begin inside a transaction", msgs: [][]byte{bg, rel, msgBegin(commitLSN+0x100, commitTime, xid+1)}},
		{name: "commit LSN differs from begin's final LSN", msgs: [][]byte{bg, msgCommit(commitLSN+1, endLSN, commitTime)}},
		{name: "insert outside a transaction", msgs: [][]byte{rel, msgInsert(outboxRelID, row...)}},
		{name: "update outside a transaction", msgs: [][]byte{rel, msgUpdate(outboxRelID, row...)}},
		{name: "delete outside a transaction", msgs: [][]byte{rel, msgDelete(outboxRelID, text(eventUUID))}},
		{name: "insert with tuple type K", msgs: [][]byte{bg, rel, newFrame('I').u32(outboxRelID).u8('K').tuple(row).b}},
		{name: "unknown tuple column kind", msgs: [][]byte{bg, rel, msgInsert(outboxRelID, text(eventUUID), text("order"), val{kind: 'x'}, text("OrderCreated"), text(`{}`))}},
		{name: "tuple column longer than the message", msgs: [][]byte{bg, rel, newFrame('I').u32(outboxRelID).u8('N').u16(1).u8('t').u32(0xFFFFFFFF).raw("abc").b}},
		{name: "relation with an absurd column count", msgs: [][]byte{newFrame('R').u32(1).str("public").str("outbox").u8('d').u16(0xFFFF).b}},
		{name: "stream start (not requested)", msgs: [][]byte{newFrame('S').u32(xid).u8(1).b}},
		{name: "unknown message type", msgs: [][]byte{{'X', 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{})
			last := len(tt.msgs) - 1
			if _, err := feed(d, tt.msgs[:last]...); err != nil {
				t.Fatalf("setup: %v", err)
			}
			tx, err := d.Decode(tt.msgs[last])
			if err == nil {
				t.Fatalf("Decode(%q) = %+v, nil; want an error", tt.msgs[last], tx)
			}
			if tx != nil {
				t.Errorf("Decode returned a Tx with error %v", err)
			}
			t.Logf("error: %v", err)
		})
	}
}

// safeDecode turns a panic into a test failure naming the input.
func safeDecode(t *testing.T, d *Decoder, msg []byte) (tx *Tx, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Decode(%q) panicked: %v", msg, p)
		}
	}()
	return d.Decode(msg)
}

func TestDecodeTruncatedFrames(t *testing.T) {
	bg := msgBegin(commitLSN, commitTime, xid)
	rel := outboxRelation(pgBytea)
	row := []val{text(eventUUID), text("order"), text("o-1"), null(), text(`\x00ff`)}
	tests := []struct {
		name  string
		setup [][]byte
		frame []byte
		// strictUpTo: every prefix shorter than this must fail with
		// ErrTruncated (default: every prefix).
		strictUpTo int
	}{
		{name: "begin", frame: bg},
		{name: "commit", setup: [][]byte{bg}, frame: msgCommit(commitLSN, endLSN, commitTime)},
		{name: "relation", frame: rel},
		{name: "relation without columns", frame: msgRelation(7, "s", "t")},
		{name: "insert", setup: [][]byte{bg, rel}, frame: msgInsert(outboxRelID, row...)},
		{name: "truncate", setup: [][]byte{bg, rel}, frame: msgTruncate(0, outboxRelID, outboxRelID)},
		{name: "update", setup: [][]byte{bg, rel}, frame: msgUpdateKey(outboxRelID, []val{text(eventUUID)}, row)},
		{name: "delete", setup: [][]byte{bg, rel}, frame: msgDelete(outboxRelID, text(eventUUID))},
		{name: "type", setup: [][]byte{bg}, frame: msgType(70000, "public", "mood")},
		{name: "origin", setup: [][]byte{bg}, frame: msgOrigin(commitLSN, "upstream")},
		{name: "message", setup: [][]byte{bg}, frame: msgMessage(commitLSN, "p", "c")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			strict := tt.strictUpTo
			if strict == 0 {
				strict = len(tt.frame)
			}
			d := newDecoder(t, Config{})
			if _, err := feed(d, append(tt.setup, tt.frame)...); err != nil {
				t.Fatalf("the whole frame: %v", err)
			}
			for n := 0; n < len(tt.frame); n++ {
				d := newDecoder(t, Config{})
				if _, err := feed(d, tt.setup...); err != nil {
					t.Fatalf("setup: %v", err)
				}
				// A copy with no spare capacity, so a read past the end
				// cannot hide in the original buffer.
				prefix := bytes.Clone(tt.frame[:n])
				tx, err := safeDecode(t, d, prefix)
				if tx != nil {
					t.Errorf("prefix of %d bytes: got a Tx", n)
				}
				switch {
				case n == 0:
					if err == nil {
						t.Errorf("empty message: no error")
					}
				case n < strict:
					if !errors.Is(err, ErrTruncated) {
						t.Errorf("prefix of %d of %d bytes: error %v, want it to wrap ErrTruncated", n, len(tt.frame), err)
					}
				}
			}
		})
	}
}

func TestDecodeLargeTransactionParts(t *testing.T) {
	const n = 25
	rel := outboxRelation(pgJSONB)
	var inserts [][]byte
	for i := range n {
		payload := fmt.Sprintf(`{"n": %d, "pad": %q}`, i, strings.Repeat("p", i*7))
		inserts = append(inserts, outboxRow(fmt.Sprintf("id-%02d", i), "order", fmt.Sprintf("o-%d", i%4), "T", text(payload)))
	}
	tests := []struct {
		name      string
		maxPart   int
		wantParts int // 0: only check the invariants
	}{
		{name: "every event its own part", maxPart: 1, wantParts: n + 1},
		{name: "a few events per part", maxPart: 1000},
		{name: "two parts", maxPart: 5000, wantParts: 2},
		{name: "default: one part", maxPart: 0, wantParts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{MaxPartBytes: tt.maxPart})
			msgs := append([][]byte{msgBegin(commitLSN, commitTime, xid), rel}, inserts...)
			msgs = append(msgs, msgCommit(commitLSN, endLSN, commitTime))
			parts := mustFeed(t, d, msgs...)
			if tt.wantParts != 0 && len(parts) != tt.wantParts {
				t.Fatalf("got %d parts, want %d", len(parts), tt.wantParts)
			}
			if tt.wantParts == 0 && len(parts) < 3 {
				t.Fatalf("got %d parts, want at least 3 for this test to mean something", len(parts))
			}
			max := tt.maxPart
			if max == 0 {
				max = 1 << 20
			}
			var events []Event
			for i, p := range parts {
				first, last := i == 0, i == len(parts)-1
				if p.First != first || p.Last != last {
					t.Errorf("part %d of %d: First=%v Last=%v, want %v %v", i, len(parts), p.First, p.Last, first, last)
				}
				wantEnd := pglogrepl.LSN(0)
				if last {
					wantEnd = endLSN
				}
				if p.EndLSN != wantEnd {
					t.Errorf("part %d: EndLSN = %s, want %s", i, p.EndLSN, wantEnd)
				}
				if p.Xid != xid || p.CommitLSN != commitLSN || !p.CommitTime.Equal(commitTime) {
					t.Errorf("part %d: Xid=%d CommitLSN=%s CommitTime=%v, want the transaction's", i, p.Xid, p.CommitLSN, p.CommitTime)
				}
				size := 0
				for j := range p.Events {
					size += p.Events[j].Held()
				}
				if !last {
					// A part is handed on as soon as it reaches the bound, not later.
					lastSize := p.Events[len(p.Events)-1].Held()
					if size < max || size-lastSize >= max {
						t.Errorf("part %d: %d bytes (%d without its last event), bound %d", i, size, size-lastSize, max)
					}
				} else if size >= max {
					t.Errorf("last part: %d bytes, bound %d", size, max)
				}
				events = append(events, p.Events...)
			}
			if len(events) != n {
				t.Fatalf("got %d events across parts, want %d", len(events), n)
			}
			for i, ev := range events {
				if want := fmt.Sprintf("id-%02d", i); string(ev.ID) != want || ev.Err != nil {
					t.Errorf("event %d: ID %q Err %v, want %q and no error", i, ev.ID, ev.Err, want)
				}
			}
			if d.Stats.Transactions != 1 || d.Stats.Inserts != n {
				t.Errorf("Stats = %+v, want 1 transaction and %d inserts", d.Stats, n)
			}

			// The next transaction starts a fresh first part.
			next := mustFeed(t, d, msgBegin(commitLSN+0x100, commitTime, xid+1), inserts[0], msgCommit(commitLSN+0x100, endLSN+0x100, commitTime))
			if len(next) == 0 || !next[0].First || next[0].Xid != xid+1 || !next[len(next)-1].Last || len(next[0].Events) != 1 {
				t.Errorf("next transaction: %d parts, want the first to carry its one event and the last to be Last", len(next))
			}
		})
	}
}

func TestDecodeRelationCacheFollowsNewRelationMessage(t *testing.T) {
	good := []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`)}
	tests := []struct {
		name      string
		relation  []byte // the second Relation message for outboxRelID
		row       []val  // inserted after it
		wantKey   string
		wantTopic string
		wantErr   error
		wantNone  bool // the insert is not an outbox event any more
	}{
		{
			name:      "column added",
			relation:  msgRelation(outboxRelID, "public", "outbox", append(outboxCols(pgJSONB), col{name: "tenant", oid: pgText})...),
			row:       append(good[:len(good):len(good)], text("acme")),
			wantKey:   "o-1",
			wantTopic: "outbox.event.order",
		},
		{
			name:     "column added, old row shape",
			relation: msgRelation(outboxRelID, "public", "outbox", append(outboxCols(pgJSONB), col{name: "tenant", oid: pgText})...),
			row:      good,
			wantErr:  ErrBadValue,
		},
		{
			name: "columns reordered",
			relation: msgRelation(outboxRelID, "public", "outbox",
				col{name: "payload", oid: pgJSONB}, col{name: "aggregateid", oid: pgText}, col{name: "type", oid: pgText},
				col{name: "aggregatetype", oid: pgText}, col{name: "id", oid: pgUUID}),
			row:       []val{text(`{}`), text("o-2"), text("T"), text("invoice"), text(eventUUID)},
			wantKey:   "o-2",
			wantTopic: "outbox.event.invoice",
		},
		{
			name: "payload column renamed",
			relation: msgRelation(outboxRelID, "public", "outbox",
				col{name: "id", oid: pgUUID}, col{name: "aggregatetype", oid: pgText}, col{name: "aggregateid", oid: pgText},
				col{name: "type", oid: pgText}, col{name: "body", oid: pgJSONB}),
			row:     good,
			wantErr: ErrMissingColumn,
		},
		{
			name:     "payload type changed to integer",
			relation: outboxRelation(pgInt4),
			row:      []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text("1")},
			wantErr:  ErrUnsupportedType,
		},
		{
			name:     "table renamed",
			relation: msgRelation(outboxRelID, "public", "outbox_old", outboxCols(pgJSONB)...),
			row:      good,
			wantNone: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{})
			if schemaReason(tt.wantErr) {
				wantSchemaChanged(t, d, tt.wantErr, outboxRelation(pgJSONB), msgInsert(outboxRelID, good...), tt.relation)
				return
			}
			tx := oneTx(t, d,
				outboxRelation(pgJSONB),
				msgInsert(outboxRelID, good...),
				tt.relation,
				msgInsert(outboxRelID, tt.row...),
			)
			wantEvents := 2
			if tt.wantNone {
				wantEvents = 1
			}
			if len(tx.Events) != wantEvents {
				t.Fatalf("got %d events, want %d", len(tx.Events), wantEvents)
			}
			if ev := tx.Events[0]; ev.Err != nil || string(ev.Key) != "o-1" {
				t.Errorf("event before the new Relation: Key %q Err %v", ev.Key, ev.Err)
			}
			if tt.wantNone {
				if d.Stats.OtherTables != 1 {
					t.Errorf("Stats.OtherTables = %d, want 1", d.Stats.OtherTables)
				}
				return
			}
			ev := tx.Events[1]
			if tt.wantErr != nil {
				if !errors.Is(ev.Err, tt.wantErr) {
					t.Errorf("Err = %v, want it to wrap %v", ev.Err, tt.wantErr)
				}
				if len(ev.Row) != len(tt.row) {
					t.Errorf("Row has %d fields, want %d", len(ev.Row), len(tt.row))
				}
				return
			}
			if ev.Err != nil || string(ev.Key) != tt.wantKey || ev.Topic != tt.wantTopic || string(ev.ID) != eventUUID {
				t.Errorf("event after the new Relation: %s; want key %q topic %q", fmtEvent(ev), tt.wantKey, tt.wantTopic)
			}
		})
	}
}

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		in       string
		want     []templatePart
		wantCols []string
		wantErr  bool
	}{
		{in: "outbox.event.${aggregatetype}", want: []templatePart{{lit: "outbox.event."}, {column: "aggregatetype"}}, wantCols: []string{"aggregatetype"}},
		{in: "${a}.${b}", want: []templatePart{{column: "a"}, {lit: "."}, {column: "b"}}, wantCols: []string{"a", "b"}},
		{in: "${a}${b}", want: []templatePart{{column: "a"}, {column: "b"}}, wantCols: []string{"a", "b"}},
		{in: "events", want: []templatePart{{lit: "events"}}},
		{in: "price$$", want: []templatePart{{lit: "price$"}}},
		{in: "$$", want: []templatePart{{lit: "$"}}},
		{in: "a$$${b}", want: []templatePart{{lit: "a$"}, {column: "b"}}, wantCols: []string{"b"}},
		{in: "$${b}", want: []templatePart{{lit: "${b}"}}},
		{in: "${weird name}", want: []templatePart{{column: "weird name"}}, wantCols: []string{"weird name"}},
		{in: "a.${b", wantErr: true},
		{in: "${", wantErr: true},
		{in: "a.${}", wantErr: true},
		{in: "", wantErr: true},
		{in: "$", wantErr: true},
		{in: "a$b", wantErr: true},
		{in: "a.$", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTemplate(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseTemplate(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTemplate(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got.parts, tt.want) {
				t.Errorf("parts = %+v, want %+v", got.parts, tt.want)
			}
			if !reflect.DeepEqual(got.Columns(), tt.wantCols) {
				t.Errorf("Columns() = %q, want %q", got.Columns(), tt.wantCols)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestValidTopic(t *testing.T) {
	tests := []struct {
		name  string
		topic string
		ok    bool
	}{
		{name: "default shape", topic: "outbox.event.order", ok: true},
		{name: "all allowed characters", topic: "AZaz09._-", ok: true},
		{name: "one character", topic: "a", ok: true},
		{name: "249 characters", topic: strings.Repeat("a", 249), ok: true},
		{name: "three dots", topic: "...", ok: true},
		{name: "250 characters", topic: strings.Repeat("a", 250)},
		{name: "empty", topic: ""},
		{name: "dot", topic: "."},
		{name: "dot dot", topic: ".."},
		{name: "space", topic: "outbox.event.bad name"},
		{name: "slash", topic: "a/b"},
		{name: "dollar", topic: "a$"},
		{name: "colon", topic: "a:b"},
		{name: "non-ASCII", topic: "événement"},
		{name: "NUL", topic: "a\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidTopic(tt.topic)
			if tt.ok && err != nil {
				t.Errorf("ValidTopic(%q) = %v, want nil", tt.topic, err)
			}
			if !tt.ok && err == nil {
				t.Errorf("ValidTopic(%q) = nil, want an error", tt.topic)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr int // number of problems reported, 0 for none
	}{
		{name: "zero value", cfg: Config{}},
		{name: "full", cfg: Config{Tables: []string{"outbox", "app.events"}, Topic: "t.${x}", HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}}},
		{name: "bad table", cfg: Config{Tables: []string{"a.b.c"}}, wantErr: 1},
		{name: "empty table part", cfg: Config{Tables: []string{".outbox"}}, wantErr: 1},
		{name: "bad template", cfg: Config{Topic: "a.${b"}, wantErr: 1},
		{name: "header without column", cfg: Config{HeaderColumns: []HeaderColumn{{Header: "h"}}}, wantErr: 1},
		{name: "header named id", cfg: Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "id"}}}, wantErr: 1},
		{name: "header twice", cfg: Config{HeaderColumns: []HeaderColumn{{Column: "a", Header: "h"}, {Column: "b", Header: "h"}}}, wantErr: 1},
		{name: "every problem at once", cfg: Config{Tables: []string{"a.b.c", ""}, Topic: "${}", HeaderColumns: []HeaderColumn{{Column: "a", Header: "id"}}}, wantErr: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var n int
			if err != nil {
				n = 1
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					n = len(j.Unwrap())
				}
			}
			if n != tt.wantErr {
				t.Errorf("Validate() = %v (%d problems), want %d problems", err, n, tt.wantErr)
			}
			if _, err := New(tt.cfg, zap.NewNop()); (err != nil) != (tt.wantErr > 0) {
				t.Errorf("New: %v", err)
			}
		})
	}
}

func TestCheckColumnType(t *testing.T) {
	cases := []struct {
		flag string
		oid  uint32
		ok   bool
	}{
		{"--payload-column", 3802, true}, // jsonb
		{"--payload-column", 17, true},   // bytea
		{"--payload-column", 23, false},  // integer
		{"--id-column", 2950, true},      // uuid
		{"--id-column", 3802, false},     // jsonb
		{"--key-column", 20, true},       // bigint
		{"--key-column", 16, false},      // boolean
		{"--header-columns", 16, true},   // any type
		{"--topic", 3802, true},          // any type
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %d", c.flag, c.oid), func(t *testing.T) {
			err := CheckColumnType(c.flag, c.oid)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUnsupportedType)) {
				t.Errorf("CheckColumnType(%s, %d) = %v, want ok %v", c.flag, c.oid, err, c.ok)
			}
		})
	}
}
