package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/httpserve"
	"github.com/walrelay/walrelay/internal/kafkaconn"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pipeline"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// config is everything `walrelay run` is told: the stages' configurations,
// bound to their flags where the types match, and the settings stages()
// turns into them or that are the command's own.
type config struct {
	rc   replication.Config
	dc   decode.Config
	sc   sink.Config
	http httpserve.Config
	// kafka is the Kafka TLS and SASL settings, resolved into sc.Kafka.
	kafka kafkaconn.Security
	// Lists, parsed by stages().
	tables, source, brokers, headerColumns, envelopeColumns, nullableColumns string
	pgURLFile                                                                string
	// maxMessageBytes is both the decoder's record limit and the sink's
	// batch limit; topicPartitions and topicRF are the sink's, range-checked.
	maxMessageBytes, topicPartitions, topicRF int
	lagWarnBytes                              int64
	logLevel, logFormat                       string
	cpuProfile                                string // bench build only (bench.go)
	// noKafka: the command does not use Kafka (status): its Kafka
	// security settings are neither checked nor warned about.
	noKafka bool
	// securityWarnings are about what the settings leave unprotected
	// (Kafka SASL without TLS), for the commands that use Kafka to log.
	securityWarnings []string
}

// envPrefix + the flag name in upper case with '-' as '_' is each flag's
// environment variable: --pg-url is WALRELAY_PG_URL.
const envPrefix = "WALRELAY_"

func envName(flagName string) string { return cli.EnvName(envPrefix, flagName) }

// kit parses walrelay's flags: WALRELAY_* overlay, did-you-mean, and each
// command's help (printUsage).
var kit = cli.Kit{Program: "walrelay", EnvPrefix: envPrefix, Usage: printUsage}

// benchFlags adds the bench build's switches (bench.go); nil in the
// product's build, whose flag set has none.
var benchFlags func(fs *flag.FlagSet, cfg *config)

func newFlagSet(name string, cfg *config) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cfg.rc.RegisterFlags(fs)
	cfg.dc.RegisterFlags(fs)
	cfg.sc.RegisterFlags(fs)
	cli.BoolVar(fs, &cfg.kafka.TLS, "kafka-tls", false, "connect to Kafka over TLS (on by itself when a --kafka-tls-* file is given)")
	fs.StringVar(&cfg.kafka.CAFile, "kafka-tls-ca-file", "", "PEM file of the CA that signed the brokers' certificates (default: the system's roots)")
	fs.StringVar(&cfg.kafka.CertFile, "kafka-tls-cert-file", "", "PEM client certificate, for brokers that require one (with --kafka-tls-key-file)")
	fs.StringVar(&cfg.kafka.KeyFile, "kafka-tls-key-file", "", "PEM private key of the client certificate")
	fs.StringVar(&cfg.kafka.ServerName, "kafka-tls-server-name", "", "host name to verify in the brokers' certificates (default: the host dialed)")
	fs.StringVar(&cfg.kafka.Mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL)")
	fs.StringVar(&cfg.kafka.Username, "kafka-sasl-username", "", "SASL user")
	fs.StringVar(&cfg.kafka.PasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password (or set WALRELAY_KAFKA_SASL_PASSWORD; there is no password flag)")
	cli.BoolVar(fs, &cfg.kafka.AllowPlainWithoutTLS, "kafka-allow-sasl-plain-without-tls", false, "let --kafka-sasl-mechanism PLAIN send the password in the clear when Kafka is reached without --kafka-tls (for a network that protects the connection itself); without it that is refused (exit 2)")
	fs.StringVar(&cfg.http.Addr, "http-addr", ":8080", "address serving /metrics, /healthz and /readyz (empty: none)")
	cli.DurationVar(fs, &cfg.http.IdleTimeout, "http-idle-timeout", 30*time.Second, "close an HTTP keep-alive connection after it has been idle this long (more than 0)")
	fs.IntVar(&cfg.http.MaxConns, "http-max-connections", 64, "most connections --http-addr keeps open; at the limit a new one closes the one idle (or sending its headers) the longest")
	cli.BoolVar(fs, &cfg.http.Pprof, "http-pprof", false, "also serve Go's profiling endpoints under /debug/pprof/ on --http-addr, e.g. go tool pprof http://HOST:8080/debug/pprof/profile?seconds=30 (they show the program's internals: keep the address private)")
	fs.StringVar(&cfg.tables, "table", "public.outbox", "outbox table, schema-qualified; a comma list makes every listed table an outbox")
	fs.StringVar(&cfg.source, "source", "tables", "where events come from: tables (inserts into --table), messages (pg_logical_emit_message(true, --message-prefix, json) in the WAL alone; PostgreSQL 14+) or tables,messages")
	fs.StringVar(&cfg.brokers, "brokers", "localhost:9092", "Kafka seed brokers, comma-separated host:port")
	fs.IntVar(&cfg.topicPartitions, "topic-partitions", 6, "partitions of created topics")
	fs.IntVar(&cfg.topicRF, "topic-replication-factor", -1, "replication factor of created topics (-1: the broker's default)")
	fs.StringVar(&cfg.headerColumns, "header-columns", "", "extra headers as column:header pairs, comma-separated (e.g. type:eventType)")
	cli.SizeVar(fs, &cfg.maxMessageBytes, "kafka-max-message-bytes", 1048588, "largest record batch sent; match the broker's message.max.bytes (a topic whose max.message.bytes is smaller gets batches of that size)")
	cli.Size64Var(fs, &cfg.lagWarnBytes, "lag-warn-bytes", 1<<30, "log a warning while the slot's lag exceeds this many bytes (0: never)")
	fs.StringVar(&cfg.pgURLFile, "pg-url-file", "", "file holding the PostgreSQL connection string, instead of --pg-url (keeps the password off the command line)")
	fs.StringVar(&cfg.nullableColumns, "nullable-columns", "payload", "columns declared without NOT NULL, comma-separated: json-schema writes \"optional\":true for them (Debezium reads it from the catalog)")
	fs.StringVar(&cfg.envelopeColumns, "envelope-columns", "", "make the value {\"payload\":...,ALIAS:column...} with these column:alias pairs, comma-separated (Debezium's column:envelope:alias placement; needs --value-converter json)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "json", "json or console")
	if benchFlags != nil {
		benchFlags(fs, cfg)
	}
	return fs
}

// stages turns the flags into the stages' configurations, reporting every
// mistake at once.
func (c *config) stages() (replication.Config, decode.Config, sink.Config, error) {
	var errs []error
	tables := cli.SplitList(c.tables)
	fromTables, fromMessages, err := parseSource(c.source)
	if err != nil {
		errs = append(errs, err)
	}
	if len(tables) == 0 && fromTables {
		errs = append(errs, errors.New("--table is empty: name at least one outbox table"))
	}
	if c.dc.MessagePrefix == "" {
		errs = append(errs, errors.New("--message-prefix is empty: name the prefix the application's messages carry (default outbox)"))
	}
	headerPairs, perrs := pairs("header-columns", c.headerColumns, "header")
	errs = append(errs, perrs...)
	if c.topicPartitions < 1 || c.topicPartitions > 1<<20 {
		errs = append(errs, fmt.Errorf("--topic-partitions %d: want at least 1", c.topicPartitions))
	}
	if c.topicRF < -1 || c.topicRF == 0 || c.topicRF > 32767 {
		errs = append(errs, fmt.Errorf("--topic-replication-factor %d: want -1 (broker default) or at least 1", c.topicRF))
	}
	if c.maxMessageBytes < 1024 || c.maxMessageBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("--kafka-max-message-bytes %d: want 1024 to 1073741824", c.maxMessageBytes))
	}
	if c.pgURLFile != "" {
		b, err := os.ReadFile(c.pgURLFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--pg-url-file: %w", err))
		case c.rc.ConnString != "":
			errs = append(errs, errors.New("--pg-url and --pg-url-file are both set: keep one"))
		default:
			c.rc.ConnString = strings.TrimSpace(string(b))
		}
	}
	// N.B. the SASL password comes from the environment or a file, never
	// from a flag, so that it never shows in a process list.
	c.kafka.Password = os.Getenv(envName("kafka-sasl-password"))
	if !c.noKafka {
		conn, warnings, err := c.kafka.Resolve()
		if err != nil {
			errs = append(errs, err)
		}
		c.sc.Kafka = conn
		c.securityWarnings = append(c.securityWarnings, warnings...)
	}
	// N.B. 0 is refused here rather than read as "the default": the
	// replication stage would default it while the rest of walrelay used it
	// raw, and a status interval or shutdown wait of nothing is a mistake.
	if c.rc.StatusInterval == 0 {
		errs = append(errs, errors.New("--status-interval 0s: want 100ms or more (default 10s), below half of the server's wal_sender_timeout"))
	}
	if c.rc.ShutdownTimeout == 0 {
		errs = append(errs, errors.New("--shutdown-timeout 0s: want more than 0 (default 30s): how long a graceful stop waits for Kafka's acknowledgements; a second SIGINT/SIGTERM stops at once"))
	}
	if c.rc.MaxMessageBytes == 0 {
		errs = append(errs, fmt.Errorf("--pg-max-message-bytes 0: want %d to %d (default %d)", replication.MinMaxMessageBytes, replication.MaxMaxMessageBytes, replication.DefaultMaxMessageBytes))
	}
	// N.B. the stages and the relay around them (watch loop, health, drain)
	// all read these effective values.
	rc, dc, sc := c.rc, c.dc, c.sc
	rc.Tables, rc.Messages, rc.NoTables = tables, fromMessages, !fromTables
	rc = rc.WithDefaults()
	dc.Tables, dc.Messages, dc.NoTables = tables, fromMessages, !fromTables
	dc.MaxRecordBytes, dc.NullableColumns = c.maxMessageBytes, cli.SplitList(c.nullableColumns)
	for _, p := range headerPairs {
		dc.HeaderColumns = append(dc.HeaderColumns, decode.HeaderColumn{Column: p[0], Header: p[1]})
	}
	envelope, perrs := pairs("envelope-columns", c.envelopeColumns, "alias")
	errs = append(errs, perrs...)
	for _, p := range envelope {
		dc.EnvelopeFields = append(dc.EnvelopeFields, decode.EnvelopeField{Column: p[0], Alias: p[1]})
	}
	// N.B. a bad template is reported by dc.Validate.
	if mapped, err := pipeline.MappedColumns(dc); err == nil {
		rc.Columns = slices.Sorted(maps.Keys(mapped))
	}
	sc.Brokers, sc.MaxMessageBytes = cli.SplitList(c.brokers), int32(c.maxMessageBytes)
	sc.TopicPartitions, sc.TopicReplicationFactor = int32(c.topicPartitions), int16(c.topicRF)
	if len(sc.Brokers) == 0 {
		errs = append(errs, errors.New("--brokers is empty: name at least one host:port"))
	}
	for _, v := range []interface{ Validate() error }{rc, dc, sc} {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		errs = append(errs, err)
	}
	if c.lagWarnBytes < 0 {
		errs = append(errs, fmt.Errorf("--lag-warn-bytes %d: want 0 (never) or more", c.lagWarnBytes))
	}
	if c.sc.CheckpointTopic == "" {
		errs = append(errs, fmt.Errorf("--checkpoint-topic is empty: name a compacted topic (default %s)", kafkastate.DefaultTopic))
	}
	if c.http.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--http-idle-timeout %s: want more than 0 (default 30s)", c.http.IdleTimeout))
	}
	if c.http.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("--http-max-connections %d: want at least 1 (default 64)", c.http.MaxConns))
	}
	if c.logFormat != "json" && c.logFormat != "console" {
		errs = append(errs, fmt.Errorf("--log-format %q: want json or console", c.logFormat))
	}
	return rc, dc, sc, errors.Join(errs...)
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
