package decode

import (
	"encoding/binary"
	"errors"
	"testing"

	"go.uber.org/zap"
)

// joinFrames encodes messages for FuzzDecode's sequence mode: each one is
// preceded by its length as a big-endian uint16.
func joinFrames(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

// splitFrames undoes joinFrames on arbitrary input: a length longer than
// what is left takes the rest.
func splitFrames(b []byte) [][]byte {
	var msgs [][]byte
	for len(b) >= 2 {
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		n = min(n, len(b))
		msgs = append(msgs, b[:n:n])
		b = b[n:]
	}
	return msgs
}

// fuzzSeeds are valid message sequences built with the test's frame builders.
func fuzzSeeds() [][][]byte {
	bg := msgBegin(commitLSN, commitTime, xid)
	cm := msgCommit(commitLSN, endLSN, commitTime)
	row := func(typ, key string, payload val) []byte {
		return outboxRow(eventUUID, typ, key, "OrderCreated", payload)
	}
	return [][][]byte{
		{bg, outboxRelation(pgJSONB), row("order", "o-1", text(`{"a":1}`)), row("order", "o-2", null()), cm},
		{outboxRelation(pgBytea), bg, row("invoice", "i-1", text(`\x00ff`)), msgUpdate(outboxRelID, text(eventUUID)), msgDelete(outboxRelID, text(eventUUID)), cm},
		{bg, msgOrigin(commitLSN, "o"), msgType(70000, "public", "mood"), outboxRelation(pgJSONB), msgTruncate(0, outboxRelID), msgMessage(commitLSN, "p", "c"), cm},
		{bg, outboxRelation(pgJSONB), row("bad name", "", unchanged()), msgInsert(outboxRelID, null()), cm},
		{bg, msgRelation(otherRelID, "public", "orders", col{name: "id", oid: pgInt8}), msgInsert(otherRelID, text("1")), cm, bg, cm},
		{bg, outboxRelation(pgJSONB), row("order", "o-1", text(`{}`)), row("order", "o-1", text(`{}`)), row("order", "o-1", text(`{}`)), cm},
	}
}

// fuzzConfigs are the decoders each sequence runs through. The second
// splits almost every event into its own part and maps a header column.
var fuzzConfigs = []Config{
	{},
	{MaxPartBytes: 64, HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}},
}

// checkFuzzTx checks what a consumer of Tx parts relies on, for any input.
func checkFuzzTx(t *testing.T, tx *Tx) {
	t.Helper()
	if !tx.Last && tx.EndLSN != 0 {
		t.Errorf("part that is not the last has EndLSN %s", tx.EndLSN)
	}
	for i := range tx.Events {
		ev := &tx.Events[i]
		if ev.Err != nil {
			if !wrapsReason(ev.Err) {
				t.Errorf("event %d: Err %v wraps none of the Err* reasons", i, ev.Err)
			}
			if ev.Reason != Reason(ev.Err) {
				t.Errorf("event %d: Reason %q, want %q", i, ev.Reason, Reason(ev.Err))
			}
			if ev.Row == nil {
				t.Errorf("event %d: Err %v without Row", i, ev.Err)
			}
			if ev.Value != nil || ev.Headers != nil {
				t.Errorf("event %d: Err %v with a Value or Headers: a poison event keeps its Row only", i, ev.Err)
			}
			continue
		}
		if len(ev.Key) == 0 {
			t.Errorf("event %d: empty Key without Err", i)
		}
		if ev.ID == nil {
			t.Errorf("event %d: nil ID without Err", i)
		}
		if err := ValidTopic(ev.Topic); err != nil {
			t.Errorf("event %d: %v without Err", i, err)
		}
	}
}

func wrapsReason(err error) bool {
	for _, r := range []error{ErrMissingColumn, ErrUnsupportedType, ErrNullID, ErrNullKey, ErrEmptyKey, ErrInvalidTopic, ErrBadValue} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

func FuzzDecode(f *testing.F) {
	for _, msgs := range fuzzSeeds() {
		f.Add(joinFrames(msgs...))
		for _, m := range msgs {
			f.Add(m)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The whole input as one message to a fresh decoder.
		d, err := New(Config{}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if tx, err := d.Decode(data); err == nil && tx != nil {
			checkFuzzTx(t, tx)
		}

		// The input as a sequence of messages, so that the relation cache
		// and the transaction state are fuzzed too. The relay discards the
		// decoder at its first error, so the sequence stops there.
		msgs := splitFrames(data)
		for _, cfg := range fuzzConfigs {
			d, err := New(cfg, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			open := false // a First part was returned and its Last not yet
			var xid uint32
			for _, m := range msgs {
				tx, err := d.Decode(m)
				if err != nil {
					if tx != nil {
						t.Errorf("Decode returned a Tx with error %v", err)
					}
					break
				}
				if tx == nil {
					continue
				}
				checkFuzzTx(t, tx)
				switch {
				case tx.First && open:
					t.Errorf("first part of xid %d while xid %d is open", tx.Xid, xid)
				case !tx.First && !open:
					t.Errorf("part of xid %d without its first part", tx.Xid)
				case !tx.First && tx.Xid != xid:
					t.Errorf("part of xid %d inside xid %d", tx.Xid, xid)
				}
				xid, open = tx.Xid, !tx.Last
				if open != d.InTx() {
					t.Errorf("InTx() = %v after a part with Last=%v", d.InTx(), tx.Last)
				}
			}
		}
	})
}
