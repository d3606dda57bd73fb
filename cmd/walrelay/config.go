package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/httpserve"
	"github.com/walrelay/walrelay/marker"
	"github.com/walrelay/walrelay/pipeline"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// splitList and indent are cli's, under the names check.go and security.go
// call.
func splitList(s string) []string { return cli.SplitList(s) }
func indent(err error) string     { return cli.Indent(err) }

// stages turns the flags into the stages' configurations, reporting every
// mistake at once.
func (c *config) stages() (replication.Config, decode.Config, sink.Config, error) {
	var errs []error
	tables := splitList(c.tables)
	fromTables, fromMessages, err := parseSource(c.source)
	if err != nil {
		errs = append(errs, err)
	}
	if len(tables) == 0 && fromTables {
		errs = append(errs, errors.New("--table is empty: name at least one outbox table"))
	}
	if c.messagePrefix == "" {
		errs = append(errs, errors.New("--message-prefix is empty: name the prefix the application's messages carry (default outbox)"))
	}
	var headers []decode.HeaderColumn
	for _, p := range splitList(c.headerColumns) {
		col, hdr, ok := strings.Cut(p, ":")
		if !ok || col == "" || hdr == "" {
			errs = append(errs, fmt.Errorf("--header-columns %q: want column:header pairs, e.g. type:eventType", p))
			continue
		}
		headers = append(headers, decode.HeaderColumn{Column: col, Header: hdr})
	}
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
		case c.pgURL != "":
			errs = append(errs, errors.New("--pg-url and --pg-url-file are both set: keep one"))
		default:
			c.pgURL = strings.TrimSpace(string(b))
		}
	}
	// N.B. the SASL password comes from the environment or a file, never
	// from a flag, so that it never shows in a process list.
	c.kafka.password = os.Getenv(envName("kafka-sasl-password"))
	var kafkaOpts []kgo.Opt
	if !c.noKafka {
		opts, warnings, err := c.kafka.options()
		if err != nil {
			errs = append(errs, err)
		}
		kafkaOpts = opts
		c.securityWarnings = append(c.securityWarnings, warnings...)
	}
	// N.B. 0 is refused here rather than read as "the default": the
	// replication stage would default it while the rest of walrelay used it
	// raw, and a status interval or shutdown wait of nothing is a mistake.
	if c.statusInterval == 0 {
		errs = append(errs, errors.New("--status-interval 0s: want 100ms or more (default 10s), below half of the server's wal_sender_timeout"))
	}
	if c.shutdownTimeout == 0 {
		errs = append(errs, errors.New("--shutdown-timeout 0s: want more than 0 (default 30s): how long a graceful stop waits for Kafka's acknowledgements; a second SIGINT/SIGTERM stops at once"))
	}
	if c.pgMaxMessage == 0 {
		errs = append(errs, fmt.Errorf("--pg-max-message-bytes 0: want %d to %d (default %d)", replication.MinMaxMessageBytes, replication.MaxMaxMessageBytes, replication.DefaultMaxMessageBytes))
	}
	// N.B. the stages and the relay around them (watch loop, health, drain)
	// all read these effective values.
	rc := replication.Config{
		ConnString:          c.pgURL,
		Slot:                c.slot,
		Publication:         c.publication,
		Tables:              tables,
		Create:              c.create,
		StatusInterval:      c.statusInterval,
		ShutdownTimeout:     c.shutdownTimeout,
		RecreateLostSlot:    c.recreateLost,
		MaxMessageBytes:     c.pgMaxMessage,
		ReadWait:            c.readWait,
		SlotFailover:        c.slotFailover.mode,
		RecreateMissingSlot: c.recreateMissing,
		RequireVerifiedTLS:  c.pgVerifiedTLS,
		Messages:            fromMessages,
		NoTables:            !fromTables,
	}.WithDefaults()
	dc := decode.Config{
		Tables:         tables,
		IDColumn:       c.idColumn,
		KeyColumn:      c.keyColumn,
		PayloadColumn:  c.payloadColumn,
		HeaderColumns:  headers,
		Topic:          c.topic,
		MaxRecordBytes: c.maxMessageBytes,

		KeyFormat:               c.keyConverter,
		ValueFormat:             c.valueConverter,
		NullableColumns:         splitList(c.nullableColumns),
		TopicRegex:              c.topicRegex,
		RouteColumn:             c.routeColumn,
		TombstoneOnEmptyPayload: c.tombstoneOnEmpty,

		Messages:              fromMessages,
		MessagePrefix:         c.messagePrefix,
		NoTables:              !fromTables,
		PartitionColumn:       c.partitionColumn,
		TimestampColumn:       c.timestampColumn,
		ExpandJSONPayload:     c.expandJSON,
		ExpandJSONNullAsBytes: c.expandNullBytes,
		SchemaNamePrefix:      c.schemaPrefix,
		SchemaVersionColumn:   c.versionColumn,
	}
	for _, p := range splitList(c.envelopeColumns) {
		col, alias, ok := strings.Cut(p, ":")
		if !ok || col == "" || alias == "" {
			errs = append(errs, fmt.Errorf("--envelope-columns %q: want column:alias pairs, e.g. type:eventType", p))
			continue
		}
		dc.EnvelopeFields = append(dc.EnvelopeFields, decode.EnvelopeField{Column: col, Alias: alias})
	}
	// N.B. a bad template is reported by dc.Validate.
	if mapped, err := pipeline.MappedColumns(dc); err == nil {
		rc.Columns = slices.Sorted(maps.Keys(mapped))
	}
	sc := sink.Config{
		Brokers:                splitList(c.brokers),
		Compression:            c.compression,
		DeliveryTimeout:        c.deliveryTimeout,
		MaxInflightBytes:       c.maxInflight,
		MaxMessageBytes:        int32(c.maxMessageBytes),
		Linger:                 c.linger,
		CreateTopics:           c.createTopics,
		TopicAllow:             c.topicAllow,
		MaxCreatedTopics:       c.maxCreated,
		TopicPartitions:        int32(c.topicPartitions),
		TopicReplicationFactor: int16(c.topicRF),
		Null:                   c.benchNullSink,
		OnPoison:               c.onPoison,
		DeadLetterTopic:        c.dlqTopic,
		Opts:                   kafkaOpts,
		ExactlyOnce:            c.exactlyOnce,
		CheckpointTopic:        c.checkpointTopic,
		TransactionalID:        c.txnID,
		TransactionTimeout:     c.txnTimeout,
		CommitInterval:         c.commitInterval,
	}
	if sc.TransactionalID == "" {
		sc.TransactionalID = "walrelay-" + c.slot
	}
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
	if c.checkpointTopic == "" {
		errs = append(errs, fmt.Errorf("--checkpoint-topic is empty: name a compacted topic (default %s)", marker.DefaultTopic))
	}
	if c.httpIdle <= 0 {
		errs = append(errs, fmt.Errorf("--http-idle-timeout %s: want more than 0 (default 30s)", c.httpIdle))
	}
	if c.httpMaxConns < 1 {
		errs = append(errs, fmt.Errorf("--http-max-connections %d: want at least 1 (default 64)", c.httpMaxConns))
	}
	if c.logFormat != "json" && c.logFormat != "console" {
		errs = append(errs, fmt.Errorf("--log-format %q: want json or console", c.logFormat))
	}
	return rc, dc, sc, errors.Join(errs...)
}

// parseSource reads --source: tables, messages, or both comma-separated.
func parseSource(s string) (tables, messages bool, err error) {
	for _, p := range splitList(s) {
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

// command is a parsed sub-command: its flags and the stages' configuration.
type command struct {
	cfg config
	rc  replication.Config
	dc  decode.Config
	sc  sink.Config
	// invalid holds the configuration mistakes when parseCommand was asked
	// to tolerate them (setup --print needs no server).
	invalid error
	// warnings are about the environment (envWarnings); run logs them,
	// the other commands have printed them.
	warnings []string
	// log is the command's logger (--log-level, --log-format, on stderr):
	// where its warnings about security go.
	log *zap.Logger
}

// parseCommand parses the flags of sub-command name, with extra adding the
// command's own flags, and builds the stages' configuration. It returns an
// exit code >= 0 when the command must stop: help asked for (0) or a
// mistake (2, printed to stderr).
func parseCommand(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet), tolerate func() bool) (*command, int) {
	c := &command{warnings: envWarnings(), log: zap.NewNop()}
	c.cfg.noKafka = name == "status"
	fs := newFlagSet(name, &c.cfg)
	if extra != nil {
		extra(fs)
	}
	// N.B. the warnings first when walrelay stops at a mistake: a
	// misspelt variable is often the mistake.
	printWarnings := func() {
		for _, w := range c.warnings {
			fmt.Fprintf(stderr, "walrelay: warning: %s\n", w)
		}
	}
	if err := kit.Parse(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		printWarnings()
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "walrelay: %s\n", line)
		}
		return nil, exitConfig
	}
	var err error
	c.rc, c.dc, c.sc, err = c.cfg.stages()
	if l, lerr := newLogger(c.cfg.logLevel, c.cfg.logFormat, stderr); lerr == nil {
		c.log = l
	}
	if err != nil {
		if tolerate != nil && tolerate() {
			c.invalid = err
			return c, -1
		}
		printWarnings()
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", indent(err))
		return nil, exitConfig
	}
	if name != "run" {
		printWarnings()
	}
	return c, -1
}

// pipeline is the relay's configuration: the stages' and what runs them.
func (c *command) pipeline() pipeline.Config {
	return pipeline.Config{Replication: c.rc, Decode: c.dc, Sink: c.sc, LagWarnBytes: c.cfg.lagWarnBytes, Marker: c.markerConfig()}
}

// markerConfig is where the slot markers are kept: the sink's Kafka, the
// --checkpoint-topic.
func (c *command) markerConfig() marker.Config {
	return marker.Config{Brokers: c.sc.Brokers, Opts: c.sc.Opts, Topic: c.cfg.checkpointTopic, CreateTopic: c.sc.CreateTopics,
		ReplicationFactor: c.sc.TopicReplicationFactor, Version: version}
}

// http is the HTTP endpoints' configuration.
func (c *config) http() httpserve.Config {
	return httpserve.Config{Addr: c.httpAddr, Pprof: c.httpPprof, IdleTimeout: c.httpIdle, MaxConns: c.httpMaxConns}
}
