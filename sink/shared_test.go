package sink

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// Pipelines share a client when the client's options are equal, whatever
// else differs; each TLS setting resolved anew still shares.
func TestSharedKey(t *testing.T) {
	tlsConn := func() kafkaconn.Conn {
		c, _, err := kafkaconn.Security{TLS: true}.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := Config{Brokers: []string{"k1:9092"}, Linger: 5 * time.Millisecond, Kafka: tlsConn()}
	key := func(c Config) string {
		k, ok := SharedKey(c)
		if !ok {
			t.Fatalf("%+v: not shareable", c)
		}
		return k
	}
	same := base
	same.Kafka, same.MaxInflightBytes, same.DeliveryTimeout, same.OnPoison = tlsConn(), 1<<20, time.Minute, OnPoisonHalt
	if key(same) != key(base) {
		t.Errorf("equal client options, other settings differ: keys %q and %q, want one", key(same), key(base))
	}
	defaults := base
	defaults.Compression, defaults.ClientID = "lz4", "walrelay"
	if key(defaults) != key(base) {
		t.Errorf("the defaults spelled out: keys %q and %q, want one", key(defaults), key(base))
	}
	for name, c := range map[string]Config{
		"linger":      {Brokers: base.Brokers, Linger: time.Millisecond},
		"compression": {Brokers: base.Brokers, Linger: base.Linger, Compression: "zstd"},
		"batch cap":   {Brokers: base.Brokers, Linger: base.Linger, MaxMessageBytes: 1 << 19},
		"brokers":     {Brokers: []string{"k2:9092"}, Linger: base.Linger},
	} {
		if key(c) == key(base) {
			t.Errorf("%s differs: one key %q, want two", name, key(c))
		}
	}
	eo := base
	eo.ExactlyOnce = true
	if _, ok := SharedKey(eo); ok {
		t.Error("an exactly-once pipeline shares a client: want its own (its transactional id)")
	}
}
