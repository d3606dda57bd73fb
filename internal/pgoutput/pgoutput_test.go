package pgoutput

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// Frames built byte by byte, checked against pglogrepl's parser.

type frame struct{ b []byte }

func newFrame(typ byte) *frame       { return &frame{b: []byte{typ}} }
func (f *frame) u8(v byte) *frame    { f.b = append(f.b, v); return f }
func (f *frame) u16(v uint16) *frame { f.b = binary.BigEndian.AppendUint16(f.b, v); return f }
func (f *frame) u32(v uint32) *frame { f.b = binary.BigEndian.AppendUint32(f.b, v); return f }
func (f *frame) u64(v uint64) *frame { f.b = binary.BigEndian.AppendUint64(f.b, v); return f }
func (f *frame) str(s string) *frame { f.b = append(append(f.b, s...), 0); return f }

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func micros(t time.Time) uint64 { return uint64(t.Sub(epoch) / time.Microsecond) }

// begin is 'B': Int64 final LSN, Int64 commit time, Int32 xid.
func begin(final pglogrepl.LSN, xid uint32) []byte {
	return newFrame('B').u64(uint64(final)).u64(micros(commitTime)).u32(xid).b
}

// commit is 'C': Int8 flags, Int64 commit LSN, Int64 end LSN, Int64 commit time.
func commit(lsn, end pglogrepl.LSN) []byte {
	return newFrame('C').u8(0).u64(uint64(lsn)).u64(uint64(end)).u64(micros(commitTime)).b
}

var commitTime = time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC)

func TestParseBeginCommitMatchPglogrepl(t *testing.T) {
	b, c := begin(0x16B374D848, 77), commit(0x16B374D848, 0x16B374D900)
	pb, err := pglogrepl.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := pglogrepl.Parse(c)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := ParseBegin(b)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := ParseCommit(c)
	if err != nil {
		t.Fatal(err)
	}
	wb, wc := pb.(*pglogrepl.BeginMessage), pc.(*pglogrepl.CommitMessage)
	if gb.FinalLSN != wb.FinalLSN || gb.Xid != wb.Xid || !gb.CommitTime.Equal(wb.CommitTime) {
		t.Errorf("ParseBegin = %+v, pglogrepl %+v", gb, wb)
	}
	if gc.CommitLSN != wc.CommitLSN || gc.EndLSN != wc.TransactionEndLSN || !gc.CommitTime.Equal(wc.CommitTime) {
		t.Errorf("ParseCommit = %+v, pglogrepl %+v", gc, wc)
	}
}

func TestParseChangesMatchPglogrepl(t *testing.T) {
	ins := newFrame('I').u32(9).u8('N').u16(3).u8('t').u32(2)
	ins.b = append(ins.b, "ab"...)
	ins.u8('n').u8('u')
	p, err := pglogrepl.Parse(ins.b)
	if err != nil {
		t.Fatal(err)
	}
	want := p.(*pglogrepl.InsertMessage)
	got, err := ParseInsert(ins.b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.RelationID != want.RelationID || len(got.New) != len(want.Tuple.Columns) {
		t.Fatalf("ParseInsert = %+v, pglogrepl %+v", got, want)
	}
	for i, c := range want.Tuple.Columns {
		if got.New[i].Kind != c.DataType || !bytes.Equal(got.New[i].Data, c.Data) {
			t.Errorf("column %d = %c %q, pglogrepl %c %q", i, got.New[i].Kind, got.New[i].Data, c.DataType, c.Data)
		}
	}

	upd := newFrame('U').u32(9).u8('K').u16(1).u8('t').u32(1)
	upd.b = append(upd.b, 'k')
	upd.u8('N').u16(1).u8('n')
	p, err = pglogrepl.Parse(upd.b)
	if err != nil {
		t.Fatal(err)
	}
	wu := p.(*pglogrepl.UpdateMessage)
	gu, err := ParseUpdate(upd.b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gu.RelationID != wu.RelationID || gu.OldKind != wu.OldTupleType || len(gu.Old) != 1 || string(gu.Old[0].Data) != "k" ||
		len(gu.New) != 1 || gu.New[0].Kind != 'n' {
		t.Errorf("ParseUpdate = %+v, pglogrepl %+v", gu, wu)
	}

	tr := newFrame('T').u32(2).u8(1).u32(9).u32(10).b
	p, err = pglogrepl.Parse(tr)
	if err != nil {
		t.Fatal(err)
	}
	wt := p.(*pglogrepl.TruncateMessage)
	gt, err := ParseTruncate(tr)
	if err != nil {
		t.Fatal(err)
	}
	if gt.Options != wt.Option || len(gt.RelationIDs) != 2 || gt.RelationIDs[0] != wt.RelationIDs[0] || gt.RelationIDs[1] != wt.RelationIDs[1] {
		t.Errorf("ParseTruncate = %+v, pglogrepl %+v", gt, wt)
	}
}

func TestParseTruncatedFrames(t *testing.T) {
	rel := newFrame('R').u32(9).str("public").str("outbox").u8('d').u16(1).u8(1).str("id").u32(2950).u32(0xFFFFFFFF).b
	ins := newFrame('I').u32(9).u8('N').u16(1).u8('t').u32(3)
	ins.b = append(ins.b, "abc"...)
	parsers := []struct {
		name  string
		frame []byte
		parse func([]byte) error
	}{
		{"begin", begin(1, 2), func(b []byte) error { _, err := ParseBegin(b); return err }},
		{"commit", commit(1, 2), func(b []byte) error { _, err := ParseCommit(b); return err }},
		{"relation", rel, func(b []byte) error { _, err := ParseRelation(b); return err }},
		{"insert", ins.b, func(b []byte) error { _, err := ParseInsert(b, nil); return err }},
		{"delete", newFrame('D').u32(9).u8('K').u16(1).u8('n').b, func(b []byte) error { _, err := ParseDelete(b, nil); return err }},
		{"truncate", newFrame('T').u32(1).u8(0).u32(9).b, func(b []byte) error { _, err := ParseTruncate(b); return err }},
		{"type", newFrame('Y').u32(7).str("public").str("mood").b, func(b []byte) error { _, err := ParseType(b); return err }},
		{"origin", newFrame('O').u64(5).str("up").b, func(b []byte) error { _, err := ParseOrigin(b); return err }},
		{"message", newFrame('M').u8(1).u64(5).str("p").u32(1).u8('c').b, func(b []byte) error { _, err := ParseLogicalMessage(b); return err }},
	}
	for _, p := range parsers {
		t.Run(p.name, func(t *testing.T) {
			if err := p.parse(p.frame); err != nil {
				t.Fatalf("whole frame: %v", err)
			}
			for n := 0; n < len(p.frame); n++ {
				if err := p.parse(bytes.Clone(p.frame[:n])); !errors.Is(err, ErrTruncated) {
					t.Errorf("prefix of %d of %d bytes: %v, want ErrTruncated", n, len(p.frame), err)
				}
			}
		})
	}
}

func TestTxState(t *testing.T) {
	const start = pglogrepl.LSN(100)
	tests := []struct {
		name    string
		msgs    [][]byte
		wantErr []bool // per message
		inTx    bool
		lastEnd pglogrepl.LSN
	}{
		{name: "nothing", lastEnd: start},
		{name: "begin", msgs: [][]byte{begin(200, 1)}, wantErr: []bool{false}, inTx: true, lastEnd: start},
		{name: "transaction", msgs: [][]byte{begin(200, 1), {'I', 0}, commit(200, 250)}, wantErr: []bool{false, false, false}, lastEnd: 250},
		{name: "commit with trailing bytes", msgs: [][]byte{begin(200, 1), append(commit(200, 250), 0xAA)}, wantErr: []bool{false, false}, lastEnd: 250},
		{name: "commit one byte short", msgs: [][]byte{begin(200, 1), commit(200, 250)[:25]}, wantErr: []bool{false, true}, inTx: true, lastEnd: start},
		{name: "commit without begin", msgs: [][]byte{commit(200, 250)}, wantErr: []bool{true}, lastEnd: start},
		{name: "begin inside transaction", msgs: [][]byte{begin(200, 1), begin(300, 2)}, wantErr: []bool{false, true}, inTx: true, lastEnd: start},
		{name: "commit of another transaction", msgs: [][]byte{begin(200, 1), commit(300, 350)}, wantErr: []bool{false, true}, inTx: true, lastEnd: start},
		{name: "truncated begin", msgs: [][]byte{begin(200, 1)[:20]}, wantErr: []bool{true}, lastEnd: start},
		{name: "begin of commit length", msgs: [][]byte{begin(200, 1), append(begin(300, 2), 0, 0, 0, 0, 0)}, wantErr: []bool{false, true}, inTx: true, lastEnd: start},
		{name: "two transactions", msgs: [][]byte{begin(200, 1), commit(200, 250), begin(300, 2), commit(300, 350)}, wantErr: []bool{false, false, false, false}, lastEnd: 350},
		{name: "empty message", msgs: [][]byte{{}}, wantErr: []bool{true}, lastEnd: start},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewTxState(start)
			for i, m := range tt.msgs {
				if err := s.Observe(m); (err != nil) != tt.wantErr[i] {
					t.Errorf("message %d: Observe = %v, want error %v", i, err, tt.wantErr[i])
				}
			}
			if s.InTx() != tt.inTx || s.LastEnd() != tt.lastEnd {
				t.Errorf("InTx %v, LastEnd %s; want %v, %s", s.InTx(), s.LastEnd(), tt.inTx, tt.lastEnd)
			}
		})
	}
}

// model is the reference TxState: a Begin opens when none is open, a Commit
// whose commit LSN is the open Begin's closes it and sets the end; anything
// else changes nothing.
type model struct {
	open  bool
	final uint64
	end   uint64
}

func (m *model) observe(b []byte) {
	switch {
	case len(b) >= 21 && b[0] == 'B' && !m.open:
		m.open, m.final = true, binary.BigEndian.Uint64(b[1:])
	case len(b) >= 26 && b[0] == 'C' && m.open && binary.BigEndian.Uint64(b[2:]) == m.final:
		m.open, m.end = false, binary.BigEndian.Uint64(b[10:])
	}
}

func checkAgainstModel(t *testing.T, msgs [][]byte) {
	t.Helper()
	s := NewTxState(1)
	m := model{end: 1}
	for i, b := range msgs {
		s.Observe(b)
		m.observe(b)
		if s.InTx() != m.open || uint64(s.LastEnd()) != m.end {
			t.Fatalf("after message %d (% x): InTx %v, LastEnd %d; model %v, %d", i, b, s.InTx(), s.LastEnd(), m.open, m.end)
		}
	}
}

func TestTxStateAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var msgs [][]byte
		for range 50 {
			lsn := pglogrepl.LSN(rng.IntN(4))
			var b []byte
			switch rng.IntN(4) {
			case 0:
				b = begin(lsn, uint32(rng.IntN(9)))
			case 1:
				b = commit(lsn, pglogrepl.LSN(rng.Uint64()))
			case 2:
				b = []byte{'I', 1, 2}
			default:
				b = commit(lsn, 7)[:rng.IntN(26)]
			}
			msgs = append(msgs, b)
		}
		checkAgainstModel(t, msgs)
	}
}

func FuzzTxState(f *testing.F) {
	f.Add(append(append([]byte{21}, begin(5, 1)...), append([]byte{26}, commit(5, 9)...)...))
	f.Add([]byte{26, 'C', 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Each message is preceded by its length byte.
		var msgs [][]byte
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			msgs = append(msgs, data[1:1+n:1+n])
			data = data[1+n:]
		}
		checkAgainstModel(t, msgs)
		for _, b := range msgs {
			// No parser panics on any input.
			ParseBegin(b)
			ParseCommit(b)
			ParseRelation(b)
			ParseInsert(b, nil)
			ParseUpdate(b, nil)
			ParseDelete(b, nil)
			ParseTruncate(b)
			ParseType(b)
			ParseOrigin(b)
			ParseLogicalMessage(b)
		}
	})
}

func TestSplitTable(t *testing.T) {
	tests := []struct {
		in, schema, table string
		ok                bool
	}{
		{"outbox", "public", "outbox", true},
		{"app.events", "app", "events", true},
		{"a.b.c", "", "", false},
		{".outbox", "", "", false},
		{"app.", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		s, n, err := SplitTable(tt.in)
		if s != tt.schema || n != tt.table || (err == nil) != tt.ok {
			t.Errorf("SplitTable(%q) = %q, %q, %v; want %q, %q, ok %v", tt.in, s, n, err, tt.schema, tt.table, tt.ok)
		}
	}
}

func TestParseLogicalMessageMatchesPglogrepl(t *testing.T) {
	for _, flags := range []byte{0, 1} {
		b := newFrame('M').u8(flags).u64(0x16B374D848).str("outbox").u32(7)
		b.b = append(b.b, `{"a":1}`...)
		p, err := pglogrepl.Parse(b.b)
		if err != nil {
			t.Fatal(err)
		}
		want := p.(*pglogrepl.LogicalDecodingMessage)
		got, err := ParseLogicalMessage(b.b)
		if err != nil {
			t.Fatal(err)
		}
		if got.LSN != want.LSN || (got.Flags&1 == 1) != want.Transactional || string(got.Prefix) != want.Prefix || !bytes.Equal(got.Content, want.Content) {
			t.Errorf("ParseLogicalMessage = %+v, pglogrepl %+v", got, want)
		}
	}
}
