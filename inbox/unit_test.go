package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/sink"
)

// The dead-letter headers are walrelay's (sink's): one reader for both.
func TestHeaderNamesAreWalrelays(t *testing.T) {
	for _, c := range []struct{ inbox, sink string }{
		{HeaderErrorClass, sink.HeaderErrorClass},
		{HeaderErrorMessage, sink.HeaderErrorMessage},
		{HeaderEventID, sink.HeaderEventID},
		{HeaderTopic, sink.HeaderTopic},
		{HeaderDropped, sink.HeaderDropped},
		{HeaderDroppedBytes, sink.HeaderDroppedBytes},
	} {
		if c.inbox != c.sink {
			t.Errorf("inbox header %q, walrelay's %q", c.inbox, c.sink)
		}
	}
}

func TestValidate(t *testing.T) {
	h := func(context.Context, pgx.Tx, *kgo.Record) error { return nil }
	good := func() Config {
		return Config{Brokers: []string{"b:9092"}, Group: "g", Topics: []string{"outbox.event.order"}, Pool: &pgxpool.Pool{}, Handler: h}
	}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want []string // substrings of the error; none: valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"nothing", func(c *Config) { *c = Config{} }, []string{"brokers", "group", "topics", "pool", "handler"}},
		{"bad regex", func(c *Config) { c.TopicsRegex, c.Topics = true, []string{"("} }, []string{`"(" is not a regular expression`}},
		{"table", func(c *Config) { c.Table = "a.b.c" }, []string{"table"}},
		{"attempts and poll", func(c *Config) { c.MaxAttempts, c.MaxPollRecords = -1, -2 }, []string{"max attempts: -1", "max poll records: -2"}},
		{"backoff", func(c *Config) { c.RetryBackoff, c.MaxRetryBackoff = 10e9, 1e9 }, []string{"retry backoff"}},
		{"dlq consumed", func(c *Config) { c.DeadLetterTopic = "outbox.event.order" }, []string{"is also consumed"}},
		{"timeouts", func(c *Config) { c.CommitInterval, c.HandlerTimeout = -1, -1 }, []string{"commit interval", "handler timeout"}},
		{"batch handler only", func(c *Config) {
			c.Handler, c.BatchHandler = nil, func(context.Context, pgx.Tx, []*kgo.Record) error { return nil }
		}, nil},
		{"batch size", func(c *Config) { c.MaxBatchRecords = -1 }, []string{"max batch records: -1"}},
		{"group not text", func(c *Config) { c.Group = "g\x00" }, []string{`group: "g\x00" is not UTF-8 text`}},
		{"group not utf-8", func(c *Config) { c.Group = "g\xff" }, []string{`group: "g\xff" is not UTF-8 text`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := good()
			c.edit(&cfg)
			cfg.setDefaults()
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if cfg.Table != "inbox_processed" || cfg.IDHeader != "id" || cfg.MaxAttempts != 5 || cfg.DeadLetterTopic != "g.dlq" || cfg.MaxPollRecords != 500 || cfg.MaxBatchRecords != 500 ||
					cfg.CommitInterval != time.Second || cfg.HandlerTimeout != 30*time.Second || cfg.InstanceID != DefaultInstanceID() || cfg.InstanceID == "" {
					t.Errorf("defaults %+v", cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", cfg)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestDDL(t *testing.T) {
	for _, c := range []struct{ table, create, index string }{
		{"", `CREATE TABLE IF NOT EXISTS "inbox_processed"`, `"inbox_processed_processed_at" ON "inbox_processed"`},
		{"app.In box", `CREATE TABLE IF NOT EXISTS "app"."In box"`, `"In box_processed_at" ON "app"."In box"`},
	} {
		ddl := DDL(c.table)
		if !strings.Contains(ddl, c.create) || !strings.Contains(ddl, c.index) || !strings.Contains(ddl, "PRIMARY KEY (consumer, id)") {
			t.Errorf("DDL(%q) =\n%s\nwant %s and index %s", c.table, ddl, c.create, c.index)
		}
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{fmt.Errorf("update: %w", &pgconn.PgError{Code: "40P01"}), true},
		{&pgconn.PgError{Code: "23505"}, false}, // unique violation: the handler's
		{&pgconn.PgError{Code: "57014"}, false}, // statement timeout: the handler's
		{errors.New("downstream says no"), false},
		{Permanent(errors.New("x")), false},
		{context.Canceled, false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad payload")
	err := fmt.Errorf("handle: %w", Permanent(base))
	if !IsPermanent(err) || !errors.Is(err, base) || err.Error() != "handle: bad payload" {
		t.Errorf("Permanent: %v (permanent %v, is base %v)", err, IsPermanent(err), errors.Is(err, base))
	}
	if IsPermanent(base) || Permanent(nil) != nil {
		t.Error("IsPermanent(plain) or Permanent(nil) wrong")
	}
}

func TestDeadLetterRecord(t *testing.T) {
	c := &Consumer{cfg: Config{Group: "g", DeadLetterTopic: "g.dlq", IDHeader: "id"}}
	r := &kgo.Record{Topic: "outbox.event.order", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte(`{"a":1}`),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("e1")}, {Key: "eventType", Value: []byte("OrderCreated")}}}
	long := strings.Repeat("é", 1000) // 2000 bytes
	dl := c.deadLetterRecord(r, ClassHandler, errors.New(long), 5)
	got := map[string]string{}
	for _, h := range dl.Headers {
		got[h.Key] = string(h.Value)
	}
	want := map[string]string{
		"id": "e1", "eventType": "OrderCreated", HeaderErrorClass: ClassHandler, HeaderTopic: "outbox.event.order",
		HeaderPartition: "2", HeaderOffset: "41", HeaderGroup: "g", HeaderAttempts: "5", HeaderEventID: "e1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if m := got[HeaderErrorMessage]; len(m) != 1024 || !strings.HasPrefix(long, m) {
		t.Errorf("error message cut to %d bytes (want 1024, whole runes)", len(m))
	}
	if dl.Topic != "g.dlq" || string(dl.Key) != "k" || string(dl.Value) != `{"a":1}` {
		t.Errorf("record %s key %q value %q", dl.Topic, dl.Key, dl.Value)
	}
	if len(r.Headers) != 2 {
		t.Errorf("the original record's headers changed: %v", r.Headers)
	}
}

func TestRedrive(t *testing.T) {
	c := &Consumer{cfg: Config{Group: "g", DeadLetterTopic: "g.dlq", IDHeader: "id"}}
	r := &kgo.Record{Topic: "outbox.event.order", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte(`{"a":1}`),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("e1")}, {Key: "eventType", Value: []byte("OrderCreated")}}}
	got, err := Redrive(c.deadLetterRecord(r, ClassHandler, errors.New("no"), 5), "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != r.Topic || string(got.Key) != "k" || string(got.Value) != `{"a":1}` || fmt.Sprint(got.Headers) != fmt.Sprint(r.Headers) {
		t.Errorf("Redrive = %s %q %q %v, want the original %s %q %q %v", got.Topic, got.Key, got.Value, got.Headers, r.Topic, r.Key, r.Value, r.Headers)
	}
	noID := c.deadLetterRecord(&kgo.Record{Topic: "t"}, ClassMissingID, errMissingID, 0)
	dropped := c.deadLetterRecord(r, ClassHandler, errors.New("no"), 5)
	dropped.Headers = append(dropped.Headers, kgo.RecordHeader{Key: HeaderDropped, Value: []byte("value")})
	for name, dl := range map[string]*kgo.Record{"no id": noID, "value dropped": dropped, "no origin": {Headers: r.Headers}} {
		if _, err := Redrive(dl, "id"); err == nil {
			t.Errorf("%s: Redrive accepted it", name)
		}
	}
}

// Two Consumers of one group in one process cannot share an instance id.
func TestClaimInstance(t *testing.T) {
	if err := claimInstance("g", "host"); err != nil {
		t.Fatal(err)
	}
	if err := claimInstance("g", "host"); err == nil || !strings.Contains(err.Error(), "Config.InstanceID") {
		t.Errorf("second claim: %v, want refused naming Config.InstanceID", err)
	}
	if err := claimInstance("other", "host"); err != nil {
		t.Errorf("another group: %v", err)
	}
	if err := claimInstance("g", DynamicMembership); err != nil || claimInstance("g", DynamicMembership) != nil {
		t.Errorf("dynamic members: %v", err)
	}
	releaseInstance("g", "host")
	if err := claimInstance("g", "host"); err != nil {
		t.Errorf("after release: %v", err)
	}
	releaseInstance("g", "host")
	releaseInstance("other", "host")
}
