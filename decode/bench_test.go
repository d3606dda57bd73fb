package decode

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeSingleRowTransactions decodes Begin, Insert, Commit of
// single-row transactions with a 300-byte JSON payload: the backlog-drain
// workload of bench/.
func BenchmarkDecodeSingleRowTransactions(b *testing.B) {
	benchSingleRow(b, Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}})
}

// BenchmarkDecodeSingleRowJSONSchema is BenchmarkDecodeSingleRowTransactions
// with key and value in the json-schema format (JsonConverter,
// schemas.enable=true): the encoding goes to reused buffers, so it adds no
// allocation.
func BenchmarkDecodeSingleRowJSONSchema(b *testing.B) {
	benchSingleRow(b, Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}},
		KeyFormat: FormatJSONSchema, ValueFormat: FormatJSONSchema, NullableColumns: []string{"payload"}})
}

func benchSingleRow(b *testing.B, cfg Config) {
	d := newDecoder(b, cfg)
	if _, err := d.Decode(outboxRelation(pgJSONB)); err != nil {
		b.Fatal(err)
	}
	payload := `{"orderId": 12345, "note": "` + strings.Repeat("x", 270) + `"}`
	const n = 1024
	begins, inserts, commits := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i := range n {
		begins[i] = msgBegin(commitLSN, commitTime, uint32(i))
		inserts[i] = outboxRow(eventUUID, "order", fmt.Sprint("agg-", i%100), "OrderCreated", text(payload))
		commits[i] = msgCommit(commitLSN, endLSN, commitTime)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(inserts[0])))
	b.ResetTimer()
	for i := range b.N {
		j := i % n
		if _, err := d.Decode(begins[j]); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Decode(inserts[j]); err != nil {
			b.Fatal(err)
		}
		tx, err := d.Decode(commits[j])
		if err != nil || tx == nil || len(tx.Events) != 1 {
			b.Fatalf("tx %v, err %v", tx, err)
		}
	}
}

// BenchmarkDecodeWideUnmappedColumn is BenchmarkDecodeSingleRowTransactions
// with a 50 KB jsonb column nobody maps: the event copies out its mapped
// fields only, so it costs about the same bytes and allocations.
func BenchmarkDecodeWideUnmappedColumn(b *testing.B) {
	d := newDecoder(b, Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}})
	cols := append(outboxCols(pgJSONB), col{name: "doc", oid: pgJSONB})
	if _, err := d.Decode(msgRelation(outboxRelID, "public", "outbox", cols...)); err != nil {
		b.Fatal(err)
	}
	payload := `{"orderId": 12345, "note": "` + strings.Repeat("x", 270) + `"}`
	doc := `{"blob": "` + strings.Repeat("w", 50000) + `"}`
	begin, commit := msgBegin(commitLSN, commitTime, xid), msgCommit(commitLSN, endLSN, commitTime)
	insert := msgInsert(outboxRelID, text(eventUUID), text("order"), text("agg-1"), text("OrderCreated"), text(payload), text(doc))
	b.ReportAllocs()
	b.SetBytes(int64(len(insert)))
	b.ResetTimer()
	for range b.N {
		if _, err := d.Decode(begin); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Decode(insert); err != nil {
			b.Fatal(err)
		}
		tx, err := d.Decode(commit)
		if err != nil || tx == nil || len(tx.Events) != 1 {
			b.Fatalf("tx %v, err %v", tx, err)
		}
	}
}

// BenchmarkDecodeSingleMessageTransactions is
// BenchmarkDecodeSingleRowTransactions with each event a logical decoding
// message of walrelay.emit's content (--source messages).
func BenchmarkDecodeSingleMessageTransactions(b *testing.B) {
	d := newDecoder(b, Config{Messages: true, HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}})
	payload := `{"orderId": 12345, "note": "` + strings.Repeat("x", 270) + `"}`
	const n = 1024
	begins, msgs, commits := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i := range n {
		begins[i] = msgBegin(commitLSN, commitTime, uint32(i))
		msgs[i] = msgMessage(commitLSN-8, "outbox", jsonbContent(eventUUID, "order", fmt.Sprint("agg-", i%100), "OrderCreated", payload))
		commits[i] = msgCommit(commitLSN, endLSN, commitTime)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(msgs[0])))
	b.ResetTimer()
	for i := range b.N {
		j := i % n
		if _, err := d.Decode(begins[j]); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Decode(msgs[j]); err != nil {
			b.Fatal(err)
		}
		tx, err := d.Decode(commits[j])
		if err != nil || tx == nil || len(tx.Events) != 1 || tx.Events[0].Err != nil {
			b.Fatalf("tx %v, err %v", tx, err)
		}
	}
}
