package decode

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestEventsOwnTheirBytes: an event keeps nothing of its pgoutput message
// (the message may be overwritten once decoded), an unmapped column costs
// the event nothing, a poison event counts its row, and the slices of an
// event do not share capacity (Held and the sink count capacities).
func TestEventsOwnTheirBytes(t *testing.T) {
	wide := strings.Repeat("w", 50000)
	hexText := `\x` + strings.Repeat("ab", 20000)
	withCol := func(payloadOID uint32, extra col) []col { return append(outboxCols(payloadOID), extra) }
	hdr := []HeaderColumn{{Column: "type", Header: "eventType"}}
	tests := []struct {
		name    string
		cfg     Config
		cols    []col
		row     []val
		want    Event // Table is filled in; for a poison event only Key, ID and Err's reason
		wantErr error
		// the event's bytes (Held without its bookkeeping) are at least
		// minBytes and under maxBytes (the allocator's size classes: an
		// eighth more for small objects, whole 8 KiB pages for large ones)
		minBytes, maxBytes int
	}{
		{
			name: "mapped columns only",
			cfg:  Config{HeaderColumns: hdr},
			cols: outboxCols(pgJSONB),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{"a":1}`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{"a":1}`), ID: []byte(eventUUID),
				Headers: []Header{{Key: "eventType", Value: []byte("OrderCreated")}}},
			minBytes: 36 + 3 + 7 + 12, maxBytes: 128,
		},
		{
			name:     "50 KB unmapped jsonb is not kept",
			cols:     withCol(pgJSONB, col{name: "doc", oid: pgJSONB}),
			row:      []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{"a":1}`), text(`{"w":"` + wide + `"}`)},
			want:     Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{"a":1}`), ID: []byte(eventUUID)},
			minBytes: 36 + 3 + 7, maxBytes: 128,
		},
		{
			name:     "unmapped bytea hex text is not kept",
			cols:     withCol(pgJSONB, col{name: "blob", oid: pgBytea}),
			row:      []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), null(), text(hexText)},
			want:     Event{Topic: "outbox.event.order", Key: []byte("o-1"), ID: []byte(eventUUID)},
			minBytes: 36 + 3, maxBytes: 128,
		},
		{
			name:     "bytea payload kept decoded, not as hex",
			cols:     outboxCols(pgBytea),
			row:      []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(hexText)},
			want:     Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: bytes.Repeat([]byte{0xab}, 20000), ID: []byte(eventUUID)},
			minBytes: 36 + 3 + 20000, maxBytes: 36 + 3 + 20000 + 20000/8,
		},
		{
			name: "bytea header decoded",
			cfg:  Config{HeaderColumns: []HeaderColumn{{Column: "sig", Header: "sig"}}},
			cols: withCol(pgJSONB, col{name: "sig", oid: pgBytea}),
			row:  []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{}`), text(`\x0102`)},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte(`{}`), ID: []byte(eventUUID),
				Headers: []Header{{Key: "sig", Value: []byte{1, 2}}}},
			minBytes: 36 + 3 + 2 + 2, maxBytes: 128,
		},
		{
			name: "NULL header and empty payload",
			cfg:  Config{HeaderColumns: hdr},
			cols: outboxCols(pgText),
			row:  []val{text(eventUUID), text("order"), text("o-1"), null(), text("")},
			want: Event{Topic: "outbox.event.order", Key: []byte("o-1"), Value: []byte{}, ID: []byte(eventUUID),
				Headers: []Header{{Key: "eventType"}}},
			minBytes: 36 + 3, maxBytes: 128,
		},
		{
			name:     "poison: NULL key, its wide row counted",
			cols:     withCol(pgJSONB, col{name: "doc", oid: pgJSONB}),
			row:      []val{text(eventUUID), text("order"), null(), text("OrderCreated"), text(`{"a":1}`), text(wide)},
			want:     Event{ID: []byte(eventUUID)},
			wantErr:  ErrNullKey,
			minBytes: 36 + 5 + 12 + 7 + 50000, maxBytes: 36 + 36 + 5 + 12 + 7 + 50000 + 8192, // a large allocation is whole pages
		},
		{
			name:     "poison: too large, the payload dropped and not counted",
			cfg:      Config{MaxRecordBytes: 1000},
			cols:     withCol(pgJSONB, col{name: "doc", oid: pgText}),
			row:      []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`{"w":"` + wide + `"}`), text("small")},
			want:     Event{Topic: "outbox.event.order", Key: []byte("o-1"), ID: []byte(eventUUID), DroppedColumn: "payload", DroppedBytes: len(wide) + 8},
			wantErr:  ErrTooLarge,
			minBytes: 36 + 3 + 36 + 5 + 3 + 12 + 5, maxBytes: 256,
		},
		{
			name:     "poison: bad bytea payload",
			cols:     outboxCols(pgBytea),
			row:      []val{text(eventUUID), text("order"), text("o-1"), text("OrderCreated"), text(`\xzz`)},
			want:     Event{Key: []byte("o-1"), ID: []byte(eventUUID)},
			wantErr:  ErrBadValue,
			minBytes: 36 + 3 + 36 + 5 + 3 + 12 + 4, maxBytes: 256,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, tt.cfg)
			msg := msgInsert(outboxRelID, tt.row...)
			tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", tt.cols...), msg)
			if len(tx.Events) != 1 {
				t.Fatalf("%d events, want 1", len(tx.Events))
			}
			ev := tx.Events[0]
			// N.B. the message is garbage once decoded: scribble over it.
			for i := range msg {
				msg[i] = '#'
			}
			want := tt.want
			want.Table = "public.outbox"
			if tt.wantErr != nil {
				checkPoison(t, ev, tt.wantErr, dropCol(tt.cols, want.DroppedColumn), dropVal(tt.row, tt.cols, want.DroppedColumn))
				if ev.Value != nil || ev.Headers != nil {
					t.Errorf("poison event keeps Value %d bytes, Headers %v", len(ev.Value), ev.Headers)
				}
				want.Err, want.Row, want.Value, want.Headers = ev.Err, ev.Row, nil, nil
			}
			if got, w := fmtEvent(ev)+fmt.Sprint(ev.DroppedColumn, ev.DroppedBytes), fmtEvent(want)+fmt.Sprint(want.DroppedColumn, want.DroppedBytes); got != w {
				t.Errorf("event after its message was overwritten =\n%s\nwant\n%s", got, w)
			}
			own := ev.Held() - eventBytes - len(ev.Headers)*headerBytes - len(ev.Row)*fieldBytes
			if own < tt.minBytes || own >= tt.maxBytes {
				t.Errorf("event holds %d bytes of its own (Held %d), want [%d, %d)", own, ev.Held(), tt.minBytes, tt.maxBytes)
			}
			checkNoSharedCapacity(t, &ev)
		})
	}
}

func dropCol(cols []col, name string) []col {
	var out []col
	for _, c := range cols {
		if c.name != name {
			out = append(out, c)
		}
	}
	return out
}

func dropVal(row []val, cols []col, name string) []val {
	var out []val
	for i, v := range row {
		if cols[i].name != name {
			out = append(out, v)
		}
	}
	return out
}

// checkNoSharedCapacity appends to each of an event's slices in turn and
// checks that no other one changed: their capacities do not overlap.
func checkNoSharedCapacity(t *testing.T, ev *Event) {
	t.Helper()
	pieces := []*[]byte{&ev.ID, &ev.Key, &ev.Value}
	for i := range ev.Headers {
		pieces = append(pieces, &ev.Headers[i].Value)
	}
	for i := range ev.Row {
		pieces = append(pieces, &ev.Row[i].Value)
	}
	snapshot := func() []string {
		var s []string
		for _, p := range pieces {
			s = append(s, string(*p))
		}
		return s
	}
	for i, p := range pieces {
		if *p == nil || cap(*p) == len(*p) {
			continue
		}
		before := snapshot()
		grown := append(*p, bytes.Repeat([]byte{'!'}, cap(*p)-len(*p))...)
		after := snapshot()
		for j := range pieces {
			if j != i && before[j] != after[j] {
				t.Errorf("appending to piece %d (%q) changed piece %d: %q -> %q", i, before[i], j, before[j], after[j])
			}
		}
		// Undo, so that the event stays as decoded.
		for k := len(*p); k < len(grown); k++ {
			grown[k] = 0
		}
	}
}

// TestDecodePartsCountPoisonRows: a transaction of poison rows is handed on
// in parts like any other, each part counting the rows it keeps.
func TestDecodePartsCountPoisonRows(t *testing.T) {
	const rows = 200
	payload := `{"pad": "` + strings.Repeat("p", 1000) + `"}`
	tests := []struct {
		name string
		row  func(i int) []byte
	}{
		{name: "NULL key", row: func(i int) []byte {
			return msgInsert(outboxRelID, text(fmt.Sprintf("id-%03d", i)), text("order"), null(), text("T"), text(payload))
		}},
		{name: "invalid topic", row: func(i int) []byte {
			return outboxRow(fmt.Sprintf("id-%03d", i), "bad topic!", "o-1", "T", text(payload))
		}},
		{name: "good rows", row: func(i int) []byte {
			return outboxRow(fmt.Sprintf("id-%03d", i), "order", "o-1", "T", text(payload))
		}},
	}
	const maxPart = 16 << 10
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{MaxPartBytes: maxPart})
			msgs := [][]byte{msgBegin(commitLSN, commitTime, xid), outboxRelation(pgJSONB)}
			for i := range rows {
				msgs = append(msgs, tt.row(i))
			}
			msgs = append(msgs, msgCommit(commitLSN, endLSN, commitTime))
			parts := mustFeed(t, d, msgs...)
			// Each row keeps at least its payload: the parts hold that much.
			if min := rows * len(payload) / maxPart; len(parts) < min {
				t.Fatalf("%d parts, want at least %d: %d rows of over %d bytes in parts of %d", len(parts), min, rows, len(payload), maxPart)
			}
			n := 0
			for i, p := range parts {
				kept := 0
				for j := range p.Events {
					ev := &p.Events[j]
					for _, f := range ev.Row {
						kept += len(f.Value)
					}
					kept += len(ev.Value)
				}
				if kept > maxPart+len(payload)+64 {
					t.Errorf("part %d keeps %d bytes of rows, more than the bound %d and one row", i, kept, maxPart)
				}
				n += len(p.Events)
			}
			if n != rows {
				t.Errorf("%d events in all parts, want %d", n, rows)
			}
		})
	}
}
