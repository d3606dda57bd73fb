package sink

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/decode"
)

// TestAdmit: what becomes of an event, decided from the event and what
// the sink knows alone (no Kafka): each outcome, its cause and dead-letter
// reason, with --on-poison=dead-letter and halt, and which cause wins when
// an event has several.
func TestAdmit(t *testing.T) {
	const limit = 500
	refused := map[string]error{
		"forbidden": fmt.Errorf("%w: forbidden does not match --topic-allow", ErrTopicNotAllowed),
		"one.more":  fmt.Errorf("%w: one.more does not exist", ErrTopicLimit),
	}
	big := strings.Repeat("x", limit)
	ev := func(topic string, mod ...func(*decode.Event)) decode.Event {
		e := decode.Event{Table: "public.outbox", Topic: topic, Key: []byte("k"), ID: []byte("id"), Value: []byte(`{}`)}
		for _, m := range mod {
			m(&e)
		}
		return e
	}
	// N.B. the decoder sets the reason on the poison events it makes (decode.Reason).
	poisoned := func(e *decode.Event) {
		e.Err, e.Reason = fmt.Errorf("column aggregateid: %w", decode.ErrNullKey), "null_key"
	}
	large := func(e *decode.Event) { e.Value = []byte(big) }
	partition := func(p int32) func(*decode.Event) {
		return func(e *decode.Event) { e.HasPartition, e.Partition = true, p }
	}
	type want struct {
		outcome outcome
		cause   cause
		reason  string
		is      error // errors.Is(why, is)
	}
	produced := want{outcome: produce}
	for _, c := range []struct {
		name      string
		ev        decode.Event
		commit    pglogrepl.LSN // default 0x2000
		recounted bool
		dl, halt  want // with --on-poison=dead-letter and =halt
	}{
		{name: "plain event", ev: ev("orders"), dl: produced, halt: produced},
		{name: "poison event", ev: ev("orders", poisoned),
			dl:   want{deadLetter, causePoison, "null_key", decode.ErrNullKey},
			halt: want{halt, causePoison, "null_key", decode.ErrNullKey}},
		{name: "topic not allowed", ev: ev("forbidden"),
			dl:   want{deadLetter, causeTopicRefused, ReasonTopicNotAllowed, ErrTopicNotAllowed},
			halt: want{halt, causeTopicRefused, ReasonTopicNotAllowed, ErrTopicNotAllowed}},
		{name: "topic limit", ev: ev("one.more"),
			dl:   want{deadLetter, causeTopicRefused, ReasonTopicLimit, ErrTopicLimit},
			halt: want{halt, causeTopicRefused, ReasonTopicLimit, ErrTopicLimit}},
		{name: "explicit partition the topic has", ev: ev("orders", partition(2)), dl: produced, halt: produced},
		{name: "explicit partition past the count: recount first", ev: ev("orders", partition(3)),
			dl: want{outcome: recount}, halt: want{outcome: recount}},
		{name: "explicit partition past the recount", ev: ev("orders", partition(3)), recounted: true,
			dl:   want{deadLetter, causeBadPartition, "bad_value", decode.ErrBadValue},
			halt: want{halt, causeBadPartition, "bad_value", decode.ErrBadValue}},
		{name: "too large for its topic", ev: ev("orders", large),
			dl:   want{deadLetter, causeTooLarge, "too_large", nil},
			halt: want{halt, causeTooLarge, "too_large", nil}},
		{name: "fits a topic with a larger cap", ev: ev("wide", large), dl: produced, halt: produced},
		{name: "isolated topic, transaction within the isolation", ev: ev("strict"),
			dl: want{outcome: isolate}, halt: want{outcome: isolate}},
		{name: "isolated topic, transaction at the isolation's end", ev: ev("strict"), commit: 0x3000,
			dl: want{outcome: isolate}, halt: want{outcome: isolate}},
		{name: "isolated topic, transaction past the isolation", ev: ev("strict"), commit: 0x3001, dl: produced, halt: produced},
		{name: "another topic while isolating", ev: ev("orders"), dl: produced, halt: produced},
		// Which cause wins.
		{name: "poison event to a refused topic", ev: ev("forbidden", poisoned),
			dl:   want{deadLetter, causePoison, "null_key", decode.ErrNullKey},
			halt: want{halt, causePoison, "null_key", decode.ErrNullKey}},
		{name: "refused topic, too large, bad partition", ev: ev("forbidden", large, partition(9)), recounted: true,
			dl:   want{deadLetter, causeTopicRefused, ReasonTopicNotAllowed, ErrTopicNotAllowed},
			halt: want{halt, causeTopicRefused, ReasonTopicNotAllowed, ErrTopicNotAllowed}},
		{name: "bad partition and too large", ev: ev("orders", large, partition(9)), recounted: true,
			dl:   want{deadLetter, causeBadPartition, "bad_value", decode.ErrBadValue},
			halt: want{halt, causeBadPartition, "bad_value", decode.ErrBadValue}},
		{name: "too large on an isolated topic: not isolated", ev: ev("strict", large),
			dl:   want{deadLetter, causeTooLarge, "too_large", nil},
			halt: want{halt, causeTooLarge, "too_large", nil}},
	} {
		for _, halts := range []bool{false, true} {
			w := c.dl
			if halts {
				w = c.halt
			}
			t.Run(fmt.Sprintf("%s/halt=%t", c.name, halts), func(t *testing.T) {
				g := gate{
					halt:       halts,
					refused:    refused,
					caps:       map[string]int32{"orders": limit, "wide": 2 * limit, "strict": limit, "forbidden": limit},
					partitions: map[string]int32{"orders": 3, "wide": 3, "strict": 3},
					isoThrough: 0x3000,
					isoTopics:  map[string]bool{"strict": true},
				}
				commit := c.commit
				if commit == 0 {
					commit = 0x2000
				}
				tx := &decode.Tx{Xid: 7, CommitLSN: commit, EndLSN: commit + 8, First: true, Last: true}
				e := c.ev
				var r *kgo.Record
				if e.Err == nil {
					r = &kgo.Record{Topic: e.Topic, Key: e.Key, Value: e.Value, Headers: []kgo.RecordHeader{{Key: "id", Value: e.ID}}}
				}
				v := g.admit(tx, &e, r, c.recounted)
				if v.outcome != w.outcome || v.cause != w.cause || v.reason != w.reason {
					t.Fatalf("verdict: outcome %d, cause %d, reason %q; want outcome %d, cause %d, reason %q (why: %v)",
						v.outcome, v.cause, v.reason, w.outcome, w.cause, w.reason, v.why)
				}
				if (w.cause == causeNone) != (v.why == nil) || w.is != nil && !errors.Is(v.why, w.is) {
					t.Errorf("why %v, want one wrapping %v", v.why, w.is)
				}
				if w.outcome == halt && !errors.Is(haltError(tx, &e, v), ErrPoison) {
					t.Errorf("halt error %v does not wrap ErrPoison", haltError(tx, &e, v))
				}
				if e.Err != c.ev.Err || (r != nil && r.Partition != 0) {
					t.Errorf("admit changed the event or its record")
				}
			})
		}
	}
}
