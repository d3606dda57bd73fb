package pipeline

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/kafkaconn"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/recovery"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// Settings are one relay's settings as a user gives them (walrelay's flags
// and WALRELAY_* variables): the stages' configurations, bound to their
// flags where the types match, and the settings Config turns into them.
type Settings struct {
	Replication replication.Config
	Decode      decode.Config
	Sink        sink.Config
	// Recovery is `walrelay recover`'s and --backfill's (package recovery).
	Recovery recovery.Options
	// Kafka is the Kafka TLS and SASL settings, resolved into Sink.Kafka;
	// its Password is the caller's to set (never a flag).
	Kafka kafkaconn.Security
	// Comma-separated lists: --table, --source, --brokers, --header-columns,
	// --envelope-columns, --nullable-columns.
	Tables, Source, Brokers, HeaderColumns, EnvelopeColumns, NullableColumns string
	// PGURLFile holds the connection string instead of Replication.ConnString.
	PGURLFile string
	// StandbyURL is a physical standby of the server (--pg-standby-url, "":
	// none): Config.StandbyURL.
	StandbyURL string
	// MaxMessageBytes is both the decoder's record limit and the sink's
	// batch limit; TopicPartitions and TopicReplicationFactor are the
	// sink's, range-checked.
	MaxMessageBytes, TopicPartitions, TopicReplicationFactor int
	LagWarnBytes                                             int64
	// NoKafka: the command does not use Kafka (status): the Kafka security
	// settings are neither checked nor warned about.
	NoKafka bool
	// NullSink is Config.NullSink (the bench build's --bench-null-sink).
	NullSink bool
}

// RegisterFlags binds s to walrelay's flags, the stages' included, with the
// command line's defaults and help texts.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	s.Replication.RegisterFlags(fs)
	s.Decode.RegisterFlags(fs)
	s.Sink.RegisterFlags(fs)
	s.Recovery.RegisterFlags(fs)
	cli.BoolVar(fs, &s.Kafka.TLS, "kafka-tls", false, "connect to Kafka over TLS (on by itself when a --kafka-tls-* file is given)")
	fs.StringVar(&s.Kafka.CAFile, "kafka-tls-ca-file", "", "PEM file of the CA that signed the brokers' certificates (default: the system's roots)")
	fs.StringVar(&s.Kafka.CertFile, "kafka-tls-cert-file", "", "PEM client certificate, for brokers that require one (with --kafka-tls-key-file)")
	fs.StringVar(&s.Kafka.KeyFile, "kafka-tls-key-file", "", "PEM private key of the client certificate")
	fs.StringVar(&s.Kafka.ServerName, "kafka-tls-server-name", "", "host name to verify in the brokers' certificates (default: the host dialed)")
	fs.StringVar(&s.Kafka.Mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL)")
	fs.StringVar(&s.Kafka.Username, "kafka-sasl-username", "", "SASL user")
	fs.StringVar(&s.Kafka.PasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password (or set WALRELAY_KAFKA_SASL_PASSWORD; there is no password flag)")
	cli.BoolVar(fs, &s.Kafka.AllowPlainWithoutTLS, "kafka-allow-sasl-plain-without-tls", false, "let --kafka-sasl-mechanism PLAIN send the password in the clear when Kafka is reached without --kafka-tls (for a network that protects the connection itself); without it that is refused (exit 2)")
	fs.StringVar(&s.Tables, "table", "public.outbox", "outbox table, schema-qualified; a comma list makes every listed table an outbox")
	fs.StringVar(&s.Source, "source", "tables", "where events come from: tables (inserts into --table), messages (pg_logical_emit_message(true, --message-prefix, json) in the WAL alone; PostgreSQL 14+) or tables,messages")
	fs.StringVar(&s.Brokers, "brokers", "localhost:9092", "Kafka seed brokers, comma-separated host:port")
	fs.IntVar(&s.TopicPartitions, "topic-partitions", 6, "partitions of created topics")
	fs.IntVar(&s.TopicReplicationFactor, "topic-replication-factor", -1, "replication factor of created topics (-1: the broker's default)")
	fs.StringVar(&s.HeaderColumns, "header-columns", "", "extra headers as column:header pairs, comma-separated (e.g. type:eventType)")
	cli.SizeVar(fs, &s.MaxMessageBytes, "kafka-max-message-bytes", 1048588, "largest record batch sent; match the broker's message.max.bytes (a topic whose max.message.bytes is smaller gets batches of that size)")
	cli.Size64Var(fs, &s.LagWarnBytes, "lag-warn-bytes", 1<<30, "log a warning while the slot's lag exceeds this many bytes (0: never)")
	fs.StringVar(&s.StandbyURL, "pg-standby-url", "", "connection string of a physical standby that synchronizes the slot (PostgreSQL 17+): run makes the standby's copy synchronizable as soon as it streams and exports walrelay_failover_ready; check and status report whether the standby has it synchronized (synced, not temporary, not invalidated) and how far it is behind the primary's")
	fs.StringVar(&s.PGURLFile, "pg-url-file", "", "file holding the PostgreSQL connection string, instead of --pg-url (keeps the password off the command line)")
	fs.StringVar(&s.NullableColumns, "nullable-columns", "payload", "columns declared without NOT NULL, comma-separated: json-schema writes \"optional\":true for them (Debezium reads it from the catalog)")
	fs.StringVar(&s.EnvelopeColumns, "envelope-columns", "", "make the value {\"payload\":...,ALIAS:column...} with these column:alias pairs, comma-separated (Debezium's column:envelope:alias placement; needs --value-converter json)")
}

// Config turns s into the relay's configuration, reporting every mistake
// at once, and returns the warnings about what the Kafka settings leave
// unprotected (SASL without TLS). Config.Marker.Version is the caller's.
func (s *Settings) Config() (Config, []string, error) {
	var errs []error
	var warnings []string
	tables := cli.SplitList(s.Tables)
	fromTables, fromMessages, err := parseSource(s.Source)
	if err != nil {
		errs = append(errs, err)
	}
	if len(tables) == 0 && fromTables {
		errs = append(errs, errors.New("--table is empty: name at least one outbox table"))
	}
	if s.Decode.MessagePrefix == "" {
		errs = append(errs, errors.New("--message-prefix is empty: name the prefix the application's messages carry (default outbox)"))
	}
	headers, perrs := pairs("header-columns", s.HeaderColumns, "header")
	errs = append(errs, perrs...)
	if s.TopicPartitions < 1 || s.TopicPartitions > 1<<20 {
		errs = append(errs, fmt.Errorf("--topic-partitions %d: want at least 1", s.TopicPartitions))
	}
	if s.TopicReplicationFactor < -1 || s.TopicReplicationFactor == 0 || s.TopicReplicationFactor > 32767 {
		errs = append(errs, fmt.Errorf("--topic-replication-factor %d: want -1 (broker default) or at least 1", s.TopicReplicationFactor))
	}
	if s.MaxMessageBytes < 1024 || s.MaxMessageBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("--kafka-max-message-bytes %d: want 1024 to 1073741824", s.MaxMessageBytes))
	}
	rc, dc, sc := s.Replication, s.Decode, s.Sink
	if s.PGURLFile != "" {
		b, err := os.ReadFile(s.PGURLFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--pg-url-file: %w", err))
		case rc.ConnString != "":
			errs = append(errs, errors.New("--pg-url and --pg-url-file are both set: keep one"))
		default:
			rc.ConnString = strings.TrimSpace(string(b))
		}
	}
	if s.StandbyURL != "" {
		if _, _, err := replication.TLSPolicy("--pg-standby-url", s.StandbyURL, rc.RequireVerifiedTLS); err != nil {
			errs = append(errs, err)
		}
	}
	if !s.NoKafka {
		conn, w, err := s.Kafka.Resolve()
		if err != nil {
			errs = append(errs, err)
		}
		sc.Kafka, warnings = conn, w
	}
	// N.B. 0 is refused here rather than read as "the default": the
	// replication stage would default it while the rest of walrelay used it
	// raw, and a status interval or shutdown wait of nothing is a mistake.
	if rc.StatusInterval == 0 {
		errs = append(errs, errors.New("--status-interval 0s: want 100ms or more (default 10s), below half of the server's wal_sender_timeout"))
	}
	if rc.ShutdownTimeout == 0 {
		errs = append(errs, errors.New("--shutdown-timeout 0s: want more than 0 (default 30s): how long a graceful stop waits for Kafka's acknowledgements; a second SIGINT/SIGTERM stops at once"))
	}
	if rc.MaxMessageBytes == 0 {
		errs = append(errs, fmt.Errorf("--pg-max-message-bytes 0: want %d to %d (default %d)", replication.MinMaxMessageBytes, replication.MaxMaxMessageBytes, replication.DefaultMaxMessageBytes))
	}
	// N.B. the stages and the relay around them (watch loop, health, drain)
	// all read these effective values.
	rc.Tables, rc.Messages, rc.NoTables = tables, fromMessages, !fromTables
	rc = rc.WithDefaults()
	dc.Tables, dc.Messages, dc.NoTables = tables, fromMessages, !fromTables
	dc.MaxRecordBytes, dc.NullableColumns = s.MaxMessageBytes, cli.SplitList(s.NullableColumns)
	for _, p := range headers {
		dc.HeaderColumns = append(dc.HeaderColumns, decode.HeaderColumn{Column: p[0], Header: p[1]})
	}
	envelope, perrs := pairs("envelope-columns", s.EnvelopeColumns, "alias")
	errs = append(errs, perrs...)
	for _, p := range envelope {
		dc.EnvelopeFields = append(dc.EnvelopeFields, decode.EnvelopeField{Column: p[0], Alias: p[1]})
	}
	// N.B. a bad template is reported by dc.Validate.
	if mapped, err := MappedColumns(dc); err == nil {
		rc.Columns = slices.Sorted(maps.Keys(mapped))
	}
	sc.Brokers, sc.MaxMessageBytes = cli.SplitList(s.Brokers), int32(s.MaxMessageBytes)
	sc.TopicPartitions, sc.TopicReplicationFactor = int32(s.TopicPartitions), int16(s.TopicReplicationFactor)
	if len(sc.Brokers) == 0 {
		errs = append(errs, errors.New("--brokers is empty: name at least one host:port"))
	}
	pc := Config{Replication: rc, Decode: dc, Sink: sc, LagWarnBytes: s.LagWarnBytes, NullSink: s.NullSink, Recovery: s.Recovery, StandbyURL: s.StandbyURL,
		Marker: kafkastate.Config{Brokers: sc.Brokers, Kafka: sc.Kafka, Topic: sc.CheckpointTopic, CreateTopic: sc.CreateTopics, ReplicationFactor: sc.TopicReplicationFactor}}
	if err := pc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if sc.CheckpointTopic == "" {
		errs = append(errs, fmt.Errorf("--checkpoint-topic is empty: name a compacted topic (default %s)", kafkastate.DefaultTopic))
	}
	return pc, warnings, errors.Join(errs...)
}

// pairs parses the list of column:what pairs of --flag.
func pairs(flag, list, what string) ([][2]string, []error) {
	var ps [][2]string
	var errs []error
	for _, p := range cli.SplitList(list) {
		col, v, ok := strings.Cut(p, ":")
		if !ok || col == "" || v == "" {
			errs = append(errs, fmt.Errorf("--%s %q: want column:%s pairs, e.g. type:eventType", flag, p, what))
			continue
		}
		ps = append(ps, [2]string{col, v})
	}
	return ps, errs
}

// parseSource reads --source: tables, messages, or both comma-separated.
func parseSource(s string) (tables, messages bool, err error) {
	for _, p := range cli.SplitList(s) {
		switch p {
		case "tables":
			tables = true
		case "messages":
			messages = true
		default:
			return false, false, fmt.Errorf("--source %q: want tables, messages or tables,messages", s)
		}
	}
	if !tables && !messages {
		return false, false, fmt.Errorf("--source %q: want tables, messages or tables,messages", s)
	}
	return tables, messages, nil
}
