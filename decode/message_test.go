package decode

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
)

// msgNonTx is 'M' with flags 0: a non-transactional message.
func msgNonTx(lsn pglogrepl.LSN, prefix, content string) []byte {
	return newFrame('M').u8(0).u64(uint64(lsn)).str(prefix).u32(uint32(len(content))).raw(content).b
}

// jsonbContent is the content walrelay.emit writes for the outbox row
// (id, aggregatetype, aggregateid, type, payload): jsonb's text output,
// keys ordered by length, then bytes, ", " and ": " between.
func jsonbContent(id, aggType, aggID, typ, payload string) string {
	return `{"id": "` + id + `", "type": "` + typ + `", "payload": ` + payload + `, "aggregateid": "` + aggID + `", "aggregatetype": "` + aggType + `"}`
}

// TestMessageMatchesOutboxRow decodes an outbox row and a message of the
// same values under each mapping: the events must be the same record.
func TestMessageMatchesOutboxRow(t *testing.T) {
	const payload = `{"total": 12.5, "items": [1, 2], "note": "a \"b\""}`
	tests := []struct {
		name       string
		cfg        Config
		payloadOID uint32
		row        val    // the outbox row's payload
		content    string // the message's payload JSON
	}{
		{name: "defaults, jsonb payload", payloadOID: pgJSONB, row: text(payload), content: payload},
		{name: "header columns", cfg: Config{HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}, {Column: "aggregatetype", Header: "agg"}}},
			payloadOID: pgJSONB, row: text(payload), content: payload},
		{name: "topic template", cfg: Config{Topic: "events.${aggregatetype}.${type}"}, payloadOID: pgJSONB, row: text(payload), content: payload},
		{name: "json value", cfg: Config{ValueFormat: FormatJSON}, payloadOID: pgJSONB, row: text(payload), content: payload},
		{name: "json-schema key and value", cfg: Config{KeyFormat: FormatJSONSchema, ValueFormat: FormatJSONSchema, NullableColumns: []string{"payload"}},
			payloadOID: pgJSONB, row: text(payload), content: payload},
		{name: "envelope", cfg: Config{ValueFormat: FormatJSON, EnvelopeFields: []EnvelopeField{{Column: "type", Alias: "eventType"}}},
			payloadOID: pgJSONB, row: text(payload), content: payload},
		{name: "null payload", payloadOID: pgJSONB, row: null(), content: `null`},
		{name: "null payload as tombstone", cfg: Config{TombstoneOnEmptyPayload: true}, payloadOID: pgJSONB, row: null(), content: `null`},
		{name: "string payload is a text column", payloadOID: pgText, row: text("hello \"you\"\n\u00e9\U0001F600"), content: `"hello \"you\"\n\u00e9\ud83d\ude00"`},
		{name: "array payload", payloadOID: pgJSONB, row: text(`[1, "x"]`), content: `[1, "x"]`},
		{name: "regex route", cfg: Config{TopicRegex: `(.*)`, Topic: "routed.$1"}, payloadOID: pgJSONB, row: text(payload), content: payload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Messages = true
			d := newDecoder(t, cfg)
			tx := oneTx(t, d, outboxRelation(tt.payloadOID), outboxRow(eventUUID, "order", "42", "OrderCreated", tt.row),
				msgMessage(commitLSN-8, "outbox", jsonbContent(eventUUID, "order", "42", "OrderCreated", tt.content)))
			if len(tx.Events) != 2 {
				t.Fatalf("got %d events, want 2", len(tx.Events))
			}
			row, msg := tx.Events[0], tx.Events[1]
			if row.Err != nil || msg.Err != nil {
				t.Fatalf("row error %v, message error %v", row.Err, msg.Err)
			}
			if row.Table != "public.outbox" || msg.Table != "message:outbox" {
				t.Errorf("tables %q and %q, want public.outbox and message:outbox", row.Table, msg.Table)
			}
			row.Table, msg.Table = "", ""
			if !reflect.DeepEqual(row, msg) {
				t.Errorf("message event\n%+v\nis not the outbox row's\n%+v", msg, row)
			}
			if d.Stats.Messages != 1 || d.Stats.Inserts != 1 {
				t.Errorf("stats %+v, want 1 message and 1 insert", d.Stats)
			}
		})
	}
}

func TestMessageContentForms(t *testing.T) {
	d := newDecoder(t, Config{Messages: true, HeaderColumns: []HeaderColumn{{Column: "type", Header: "eventType"}}})
	// Other key order, whitespace, a number key, an escaped key, a repeated
	// key (the last wins, as in jsonb), fields walrelay does not map.
	content := "{ \"payload\" : {\"a\":1} ,\"extra\":[{\"}\":\"]\"}],\n\"aggregateid\": 42, \"aggregate\\u0074ype\":\"order\",\"type\":\"first\",\"type\":\"T\\/2\",\"id\":\"e-1\"}"
	tx := oneTx(t, d, msgMessage(commitLSN, "outbox", content))
	if len(tx.Events) != 1 {
		t.Fatalf("got %d events", len(tx.Events))
	}
	ev := tx.Events[0]
	if ev.Err != nil {
		t.Fatal(ev.Err)
	}
	got := map[string]string{"id": string(ev.ID), "key": string(ev.Key), "value": string(ev.Value), "topic": ev.Topic, "eventType": string(ev.Headers[0].Value)}
	want := map[string]string{"id": "e-1", "key": "42", "value": `{"a":1}`, "topic": "outbox.event.order", "eventType": "T/2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMessagePoison(t *testing.T) {
	tests := []struct {
		name, content string
		want          error
		id, key       string
	}{
		{name: "not JSON", content: `{"id": "e-1", "aggregateid": `, want: ErrBadValue},
		{name: "not an object", content: `["e-1"]`, want: ErrBadValue},
		{name: "empty", content: ``, want: ErrBadValue},
		{name: "missing payload", content: `{"id": "e-1", "type": "T", "aggregateid": "42", "aggregatetype": "order"}`, want: ErrMissingColumn, id: "e-1", key: "42"},
		{name: "missing key", content: `{"id": "e-1", "type": "T", "payload": {}, "aggregatetype": "order"}`, want: ErrMissingColumn, id: "e-1"},
		{name: "id null", content: `{"id": null, "type": "T", "payload": {}, "aggregateid": "42", "aggregatetype": "order"}`, want: ErrNullID, key: "42"},
		{name: "key empty", content: `{"id": "e-1", "type": "T", "payload": {}, "aggregateid": "", "aggregatetype": "order"}`, want: ErrEmptyKey, id: "e-1"},
		{name: "bad topic", content: `{"id": "e-1", "type": "T", "payload": {}, "aggregateid": "42", "aggregatetype": "a/b"}`, want: ErrInvalidTopic, id: "e-1", key: "42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{Messages: true})
			tx := oneTx(t, d, msgMessage(commitLSN, "outbox", tt.content))
			if len(tx.Events) != 1 {
				t.Fatalf("got %d events, want 1", len(tx.Events))
			}
			ev := tx.Events[0]
			if !errors.Is(ev.Err, tt.want) {
				t.Fatalf("error %v, want %v", ev.Err, tt.want)
			}
			if len(ev.Row) != 1 || ev.Row[0].Name != "content" || string(ev.Row[0].Value) != tt.content {
				t.Errorf("row %+v, want the raw content as field \"content\"", ev.Row)
			}
			if string(ev.ID) != tt.id || string(ev.Key) != tt.key || ev.Table != "message:outbox" {
				t.Errorf("id %q key %q table %q, want %q %q message:outbox", ev.ID, ev.Key, ev.Table, tt.id, tt.key)
			}
		})
	}
	d := newDecoder(t, Config{Messages: true})
	tx := oneTx(t, d, msgMessage(commitLSN, "outbox", `{"id": "e-1", "aggregatetype": "order"}`))
	if msg := tx.Events[0].Err.Error(); !strings.Contains(msg, `"aggregateid" (--key-column)`) || !strings.Contains(msg, `"payload" (--payload-column)`) {
		t.Errorf("error %q does not name both missing fields and their flags", msg)
	}
}

func TestMessageKinds(t *testing.T) {
	d := newDecoder(t, Config{Messages: true})
	good := jsonbContent(eventUUID, "order", "42", "T", "{}")
	// A non-transactional message outside a transaction, one of another
	// prefix inside, then a transactional one: one event.
	txs := mustFeed(t, d, msgNonTx(commitLSN-100, "outbox", good), msgNonTx(commitLSN-90, "outbox", good),
		msgBegin(commitLSN, commitTime, xid), msgMessage(commitLSN-50, "other", good), msgMessage(commitLSN-40, "outbox", good),
		msgCommit(commitLSN, endLSN, commitTime))
	if len(txs) != 1 || len(txs[0].Events) != 1 || txs[0].Events[0].Err != nil {
		t.Fatalf("got %+v, want one transaction of one event", txs)
	}
	want := Stats{Transactions: 1, Messages: 1, NonTransactional: 2, OtherMessages: 1}
	if d.Stats != want {
		t.Errorf("stats %+v, want %+v", d.Stats, want)
	}
	if _, err := d.Decode(msgMessage(commitLSN, "outbox", good)); err == nil {
		t.Error("a transactional message outside a transaction decoded without error")
	}

	// Without the message source, messages are skipped and not counted.
	off := newDecoder(t, Config{})
	tx := oneTx(t, off, msgMessage(commitLSN, "outbox", good))
	if len(tx.Events) != 0 || off.Stats != (Stats{Transactions: 1}) {
		t.Errorf("message source off: %d events, stats %+v", len(tx.Events), off.Stats)
	}

	// Without tables, an insert into the default outbox is another table's.
	nt := newDecoder(t, Config{Messages: true, NoTables: true})
	tx = oneTx(t, nt, outboxRelation(pgJSONB), outboxRow(eventUUID, "order", "42", "T", text("{}")), msgMessage(commitLSN, "outbox", good))
	if len(tx.Events) != 1 || tx.Events[0].Table != "message:outbox" || nt.Stats.OtherTables != 1 {
		t.Errorf("no tables: events %+v, stats %+v", tx.Events, nt.Stats)
	}
}

// TestMessageOrder: rows and messages of one transaction keep their order
// in the stream, across parts.
func TestMessageOrder(t *testing.T) {
	d := newDecoder(t, Config{Messages: true, MessagePrefix: "ev", MaxPartBytes: 600})
	msgs := [][]byte{msgBegin(commitLSN, commitTime, xid), outboxRelation(pgJSONB)}
	var want []string
	for i := range 12 {
		id := string(rune('a'+i)) + "-id"
		if i%3 == 0 {
			msgs = append(msgs, outboxRow(id, "order", "42", "T", text("{}")))
		} else {
			msgs = append(msgs, msgMessage(commitLSN-pglogrepl.LSN(100-i), "ev", jsonbContent(id, "order", "42", "T", "{}")))
		}
		want = append(want, id)
	}
	msgs = append(msgs, msgCommit(commitLSN, endLSN, commitTime))
	txs := mustFeed(t, d, msgs...)
	if len(txs) < 2 {
		t.Fatalf("got %d parts, want several (MaxPartBytes)", len(txs))
	}
	var got []string
	for _, tx := range txs {
		for _, ev := range tx.Events {
			got = append(got, string(ev.ID))
		}
	}
	if !reflect.DeepEqual(got, want) || !txs[len(txs)-1].Last || txs[len(txs)-1].EndLSN != endLSN {
		t.Errorf("ids %v, want %v; last part %+v", got, want, txs[len(txs)-1])
	}
}

func TestMessageConfig(t *testing.T) {
	if err := (Config{NoTables: true}).Validate(); err == nil {
		t.Error("no tables and no messages: valid")
	}
	if err := (Config{Messages: true, ValueFormat: FormatBytes}).Validate(); err == nil {
		t.Error("messages with a bytes value: valid")
	}
	if err := (Config{Messages: true, NoTables: true}).Validate(); err != nil {
		t.Error(err)
	}
}

// FuzzMessageContent: any content decodes without panic; when
// encoding/json reads it as an object of strings, the event carries them.
func FuzzMessageContent(f *testing.F) {
	f.Add(jsonbContent("e", "order", "42", "T", `{"a": [1, {"b": "}"}]}`))
	f.Add(`{"id":"\ud83d\ude00","aggregateid":"\u00e9\n","aggregatetype":"x","payload":"\"","type":""}`)
	f.Add(`{"id":"a\ud800b","aggregateid":"k","aggregatetype":"x","payload":1}`)
	f.Fuzz(func(t *testing.T, content string) {
		d := newDecoder(t, Config{Messages: true})
		txs, err := feed(d, msgBegin(commitLSN, commitTime, xid), msgMessage(commitLSN, "outbox", content), msgCommit(commitLSN, endLSN, commitTime))
		if err != nil || len(txs) != 1 || len(txs[0].Events) != 1 {
			t.Fatalf("err %v, txs %d", err, len(txs))
		}
		ev := txs[0].Events[0]
		if !utf8.ValidString(content) {
			return // encoding/json replaces invalid UTF-8; PostgreSQL's text is valid
		}
		var m map[string]any
		if json.Unmarshal([]byte(content), &m) != nil {
			if ev.Err == nil {
				t.Fatalf("content encoding/json refuses decoded to an event")
			}
			return
		}
		id, ok1 := m["id"].(string)
		key, ok2 := m["aggregateid"].(string)
		if ok1 && ok2 && id != "" && key != "" && ev.Err == nil {
			if string(ev.ID) != id || string(ev.Key) != key {
				t.Fatalf("id %q key %q, encoding/json reads %q %q", ev.ID, ev.Key, id, key)
			}
		}
	})
}

// TestMessageNotUTF8: a content that is not UTF-8 (the bytea form of
// pg_logical_emit_message sends any bytes, never converted) is poison,
// kept whole as bytea's hex form, even when it is valid JSON otherwise.
func TestMessageNotUTF8(t *testing.T) {
	content := "{\"id\": \"e-1\", \"type\": \"T\", \"payload\": {\"note\": \"caf\xe9\"}, \"aggregateid\": \"42\", \"aggregatetype\": \"order\"}"
	d := newDecoder(t, Config{Messages: true})
	tx := oneTx(t, d, msgMessage(commitLSN, "outbox", content))
	if len(tx.Events) != 1 {
		t.Fatalf("got %d events, want 1", len(tx.Events))
	}
	ev := tx.Events[0]
	if !errors.Is(ev.Err, ErrBadValue) || !strings.Contains(ev.Err.Error(), "not valid UTF-8") {
		t.Fatalf("error %v, want %v saying the content is not valid UTF-8", ev.Err, ErrBadValue)
	}
	want := `\x` + hex.EncodeToString([]byte(content))
	if len(ev.Row) != 1 || ev.Row[0].Name != "content" || ev.Row[0].Type != oidBytea || string(ev.Row[0].Value) != want {
		t.Errorf("row %+v, want field \"content\" of type bytea %s", ev.Row, want)
	}
}
