package sink

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/decode"
)

// fitSink is a sink as far as fitting dead-letter records goes: its
// dead-letter topic accepts limit bytes.
func fitSink(limit int32) *Sink {
	cfg := Config{MaxMessageBytes: 1 << 20}.withDefaults()
	return &Sink{cfg: cfg, known: map[string]int32{cfg.DeadLetterTopic: limit}}
}

func TestDeadLetterRecordsFitTheirTopic(t *testing.T) {
	big := func(c byte, n int) []byte { return []byte(strings.Repeat(string(c), n)) }
	cases := []struct {
		name          string
		ev            decode.Event
		limit         int32
		dropped       string // walrelay.dropped.column
		truncated     []string
		keepInValue   string
		wantHaltError bool
	}{
		{
			name: "fits as it is",
			ev: decode.Event{Key: []byte("k"), ID: []byte("id"), Err: fmt.Errorf("%w: x", decode.ErrNullID), Reason: "null_id",
				Row: []decode.Field{{Name: "aggregatetype", Type: 25, Value: []byte("orders")}}},
			limit: 10000, keepInValue: `"aggregatetype":"orders"`,
		},
		{
			name: "huge aggregatetype dropped",
			ev: decode.Event{Key: []byte("k"), ID: []byte("id"), Err: fmt.Errorf("%w: too long", decode.ErrInvalidTopic), Reason: "invalid_topic",
				Row: []decode.Field{{Name: "aggregatetype", Type: 25, Value: big('a', 20000)}, {Name: "type", Type: 25, Value: []byte("T")}}},
			limit: 10000, dropped: "aggregatetype", keepInValue: `"type":"T"`,
		},
		{
			name: "huge id and key cut, decoder's dropped payload kept in the list",
			ev: decode.Event{Key: big('k', 20000), ID: big('i', 20000), Err: fmt.Errorf("%w: x", decode.ErrTooLarge), Reason: "too_large",
				DroppedColumn: "payload", DroppedBytes: 5000,
				Row: []decode.Field{{Name: "id", Type: 25, Value: big('i', 20000)}, {Name: "aggregateid", Type: 25, Value: big('k', 20000)}, {Name: "type", Type: 25, Value: []byte("T")}}},
			limit: 10000, dropped: "payload,", truncated: []string{HeaderEventID + ":20000", "key:20000"}, keepInValue: `"type":"T"`,
		},
		{
			name: "long error message cut",
			ev: decode.Event{Key: []byte("k"), ID: []byte("id"), Err: errors.New(strings.Repeat("e", 3000)), Reason: "other",
				Row: []decode.Field{{Name: "type", Type: 25, Value: []byte("T")}}},
			limit: 2048, truncated: []string{HeaderErrorMessage + ":3000"}, keepInValue: `"type":"T"`,
		},
		{
			name: "cannot fit",
			ev: decode.Event{Key: []byte("k"), ID: []byte("id"), Err: errors.New("x"), Reason: "other",
				Row: []decode.Field{{Name: "type", Type: 25, Value: []byte("T")}}},
			limit: 100, wantHaltError: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fitSink(c.limit)
			c.ev.Table = "public.outbox"
			dl, err := s.deadLetterEvent(tx(1, start+100), &c.ev)
			if c.wantHaltError {
				if !errors.Is(err, ErrPoison) {
					t.Fatalf("error %v, want ErrPoison", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := loneBatchBytes(dl); n > int(c.limit) {
				t.Errorf("dead-letter record takes %d bytes, limit %d", n, c.limit)
			}
			if got := header(dl, HeaderDropped); !strings.HasPrefix(got, c.dropped) || c.dropped == "" && got != "" {
				t.Errorf("dropped %q, want %q first", got, c.dropped)
			}
			for _, want := range c.truncated {
				if got := header(dl, HeaderTruncated); !strings.Contains(got, want) {
					t.Errorf("truncated %q, want it to name %s", got, want)
				}
			}
			if !strings.Contains(string(dl.Value), c.keepInValue) {
				t.Errorf("value %.200s lost %s, which fits", dl.Value, c.keepInValue)
			}
			if got := header(dl, HeaderErrorClass); got == "" {
				t.Errorf("no error class")
			}
		})
	}
}

func TestRejectedRecordDeadLetterFits(t *testing.T) {
	s := fitSink(2048)
	r := &kgo.Record{Topic: "orders", Key: []byte(strings.Repeat("k", 5000)), Value: []byte(strings.Repeat("v", 5000)),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("id1")}, {Key: "eventType", Value: []byte(strings.Repeat("t", 3000))}}}
	dl, err := s.deadLetterRejected(r, tooLargeErr("orders", 12000, 6000), recordMeta{table: "public.outbox"})
	if err != nil {
		t.Fatal(err)
	}
	if n := loneBatchBytes(dl); n > 2048 {
		t.Errorf("dead-letter record takes %d bytes", n)
	}
	if got := header(dl, HeaderDropped); !strings.HasPrefix(got, "value,") || !strings.Contains(got, "key") || !strings.Contains(got, "headers.eventType") {
		t.Errorf("dropped %q, want value, key and headers.eventType", got)
	}
	if got := header(dl, HeaderDroppedBytes); !strings.HasPrefix(got, "5000,") {
		t.Errorf("dropped bytes %q", got)
	}
	if header(dl, HeaderEventID) != "id1" || header(dl, HeaderTopic) != "orders" || header(dl, HeaderErrorClass) != "too_large" {
		t.Errorf("headers %v", dl.Headers)
	}
}

// TestLoneBatchBytesMatchesTheClient: a record of loneBatchBytes fits a
// topic of exactly that cap, one byte less and the client fails it.
func TestLoneBatchBytesMatchesTheClient(t *testing.T) {
	c := newCluster(t)
	r := &kgo.Record{Topic: "exact", Key: []byte("key"), Value: []byte(strings.Repeat("v", 1000)), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("x")}}}
	n := int32(loneBatchBytes(r))
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(t.Context(), 1, 1, nil, "exact"); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int32{n, n - 1} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchMaxBytes(limit), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		rec := *r
		err = cl.ProduceSync(t.Context(), &rec).FirstErr()
		cl.Close()
		if fits := limit >= n; fits != (err == nil) {
			t.Errorf("cap %d, record %d: produce error %v", limit, n, err)
		}
	}
}
