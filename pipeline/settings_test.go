package pipeline

import (
	"flag"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/sink"
)

// settingsOf binds a Settings to a flag set and parses args, as walrelay's
// commands do (without the environment overlay).
func settingsOf(t *testing.T, args ...string) *Settings {
	t.Helper()
	var s Settings
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	s.RegisterFlags(fs)
	if err := fs.Parse(append([]string{"--pg-url", "postgres://localhost/db"}, args...)); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestSettingsConfig(t *testing.T) {
	s := settingsOf(t, "--brokers", "k1:9092, k2:9092", "--header-columns", "type:eventType", "--envelope-columns", "type:t",
		"--value-converter", "json", "--topic-replication-factor", "3", "--checkpoint-topic", "cp", "--slot", "s1")
	pc, warnings, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q for plaintext Kafka without SASL", warnings)
	}
	if got := pc.Sink.Brokers; len(got) != 2 || got[1] != "k2:9092" {
		t.Errorf("brokers %q", got)
	}
	if got := pc.Decode.HeaderColumns; len(got) != 1 || got[0] != (decode.HeaderColumn{Column: "type", Header: "eventType"}) {
		t.Errorf("header columns %+v", got)
	}
	if got := pc.Decode.EnvelopeFields; len(got) != 1 || got[0] != (decode.EnvelopeField{Column: "type", Alias: "t"}) {
		t.Errorf("envelope fields %+v", got)
	}
	if m := pc.Marker; m.Topic != "cp" || len(m.Brokers) != 2 || m.ReplicationFactor != 3 || !m.CreateTopic {
		t.Errorf("marker config %+v: want the sink's brokers, --checkpoint-topic and the created topics' settings", m)
	}
	// N.B. the transactional id's default is the sink's (Config.WithSlot),
	// never a copy here.
	if pc.Sink.TransactionalID != "" || pc.Sink.WithSlot(pc.Replication.Slot).TransactionalID != "walrelay-s1" {
		t.Errorf("transactional id %q", pc.Sink.TransactionalID)
	}
}

func TestSettingsMistakes(t *testing.T) {
	s := settingsOf(t, "--header-columns", "type", "--envelope-columns", "a:", "--topic-partitions", "0", "--brokers", "", "--lag-warn-bytes", "-1")
	s.NullSink = true
	s.Sink.ExactlyOnce = true
	_, _, err := s.Config()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`--header-columns "type": want column:header pairs`, `--envelope-columns "a:": want column:alias pairs`,
		"--topic-partitions 0", "--brokers is empty", "--lag-warn-bytes -1", sink.ErrNullExactlyOnce.Error()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
