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
	fs.StringVar(&cfg.rc.ConnString, "pg-url", "", "PostgreSQL connection string (URL or key=value); the replication connection is derived from it")
	fs.StringVar(&cfg.rc.Publication, "publication", "walrelay", "publication to stream")
	fs.StringVar(&cfg.rc.Slot, "slot", "walrelay", "logical replication slot (pgoutput)")
	fs.StringVar(&cfg.tables, "table", "public.outbox", "outbox table, schema-qualified; a comma list makes every listed table an outbox")
	fs.StringVar(&cfg.source, "source", "tables", "where events come from: tables (inserts into --table), messages (pg_logical_emit_message(true, --message-prefix, json) in the WAL alone; PostgreSQL 14+) or tables,messages")
	fs.StringVar(&cfg.dc.MessagePrefix, "message-prefix", "outbox", "prefix of the logical decoding messages that are events, with --source messages")
	cli.BoolVar(fs, &cfg.rc.Create, "create", true, "create the publication (FOR TABLE ... WITH (publish = 'insert', publish_via_partition_root = true)) and the slot when missing")
	fs.StringVar(&cfg.brokers, "brokers", "localhost:9092", "Kafka seed brokers, comma-separated host:port")
	fs.StringVar(&cfg.dc.Topic, "topic", "outbox.event.${aggregatetype}", "topic template over column names")
	cli.BoolVar(fs, &cfg.sc.CreateTopics, "create-topics", true, "create a missing topic through the admin API before its first record")
	fs.StringVar(&cfg.sc.TopicAllow, "topic-allow", "", "regular expression every record's topic must match as a whole (e.g. 'outbox\\.event\\.[a-z_]+'); an event routed elsewhere is dead-lettered (reason topic_not_allowed) or, with --on-poison=halt, stops walrelay, and its topic is never created (empty: any topic; the dead-letter and checkpoint topics and __* are refused always)")
	fs.IntVar(&cfg.sc.MaxCreatedTopics, "max-created-topics", 100, "most topics walrelay creates under --create-topics while it runs; an event whose missing topic would be one more is dead-lettered (reason topic_limit) or halts (0: no cap; existing topics do not count)")
	fs.IntVar(&cfg.topicPartitions, "topic-partitions", 6, "partitions of created topics")
	fs.IntVar(&cfg.topicRF, "topic-replication-factor", -1, "replication factor of created topics (-1: the broker's default)")
	fs.StringVar(&cfg.dc.IDColumn, "id-column", "id", "column holding the event id (header \"id\")")
	fs.StringVar(&cfg.dc.KeyColumn, "key-column", "aggregateid", "column holding the record key")
	fs.StringVar(&cfg.dc.PayloadColumn, "payload-column", "payload", "column holding the record value")
	fs.StringVar(&cfg.headerColumns, "header-columns", "", "extra headers as column:header pairs, comma-separated (e.g. type:eventType)")
	cli.DurationVar(fs, &cfg.rc.StatusInterval, "status-interval", 10*time.Second, "longest time between two status updates to PostgreSQL: 100ms or more, below half of the server's wal_sender_timeout (0 is refused)")
	cli.DurationVar(fs, &cfg.rc.ReadWait, "pg-read-wait", time.Millisecond, "after a read that empties the replication socket, wait this long before the next, so a backlog arrives in large reads (less CPU for walrelay and the walsender; adds at most this latency), while messages come at 6 or more per wait (over 100 ms); a quieter stream is read at once, and so is a Unix socket; 0: always read at once")
	cli.DurationVar(fs, &cfg.rc.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long to wait for outstanding Kafka acknowledgements (more than 0; a second signal stops at once)")
	cli.SizeVar(fs, &cfg.rc.MaxMessageBytes, "pg-max-message-bytes", replication.DefaultMaxMessageBytes, "largest replication message accepted from PostgreSQL, i.e. one outbox row with all its columns; a larger row stops walrelay (exit 2) before it is read, and receiving one costs about twice its size in memory")
	cli.SizeVar(fs, &cfg.sc.MaxInflightBytes, "max-inflight-bytes", sink.DefaultMaxInflightBytes, "bytes of records buffered or in flight to Kafka (key, value and headers plus 1 KiB each) before reading from PostgreSQL pauses; bounds memory")
	fs.StringVar(&cfg.sc.Compression, "kafka-compression", "lz4", "record batch compression: none, gzip, snappy, lz4 or zstd")
	cli.DurationVar(fs, &cfg.sc.DeliveryTimeout, "kafka-delivery-timeout", 2*time.Minute, "how long a record may wait for Kafka's acknowledgement after it is handed to the client, retries included, before it fails and streaming restarts from the last confirmed position; a transaction may take longer")
	cli.SizeVar(fs, &cfg.maxMessageBytes, "kafka-max-message-bytes", 1048588, "largest record batch sent; match the broker's message.max.bytes (a topic whose max.message.bytes is smaller gets batches of that size)")
	cli.DurationVar(fs, &cfg.sc.Linger, "kafka-linger", 5*time.Millisecond, "how long a partition waits for more records before sending (Java's linger.ms; at most 1m, below --kafka-delivery-timeout; 0: never) while transactions come fast enough for it to gather 10 of them (2,000/s at 5ms); slower, records go as soon as walrelay has caught up with the slot; what lingers goes at once when walrelay waits for room under --max-inflight-bytes")
	fs.StringVar(&cfg.sc.OnPoison, "on-poison", "dead-letter", "an event that cannot become a Kafka record: dead-letter (park it in --dlq-topic and go on) or halt (stop without confirming past it)")
	fs.StringVar(&cfg.sc.DeadLetterTopic, "dlq-topic", "walrelay.dlq", "dead-letter topic for poison events")
	fs.StringVar(&cfg.http.Addr, "http-addr", ":8080", "address serving /metrics, /healthz and /readyz (empty: none)")
	cli.DurationVar(fs, &cfg.http.IdleTimeout, "http-idle-timeout", 30*time.Second, "close an HTTP keep-alive connection after it has been idle this long (more than 0)")
	fs.IntVar(&cfg.http.MaxConns, "http-max-connections", 64, "most connections --http-addr keeps open; at the limit a new one closes the one idle (or sending its headers) the longest")
	cli.BoolVar(fs, &cfg.http.Pprof, "http-pprof", false, "also serve Go's profiling endpoints under /debug/pprof/ on --http-addr, e.g. go tool pprof http://HOST:8080/debug/pprof/profile?seconds=30 (they show the program's internals: keep the address private)")
	cli.Size64Var(fs, &cfg.lagWarnBytes, "lag-warn-bytes", 1<<30, "log a warning while the slot's lag exceeds this many bytes (0: never)")
	cli.BoolVar(fs, &cfg.rc.RecreateLostSlot, "recreate-lost-slot", false, "DROP and re-create the slot if PostgreSQL invalidated it (wal_status lost): events committed while it was behind are LOST and never relayed")
	fs.Var(&cfg.rc.SlotFailover, "slot-failover", "create the slot as a failover slot, synchronized to standbys with sync_replication_slots, and make an existing one such a slot before streaming (PostgreSQL 17+; auto: on 17+, off before; true on an older server is refused)")
	cli.BoolVar(fs, &cfg.rc.RecreateMissingSlot, "recreate-missing-slot", false, "create the slot again when it is missing although walrelay streamed from it (dropped, or lost in a failover): events committed since its last confirmed position are LOST; use once, after deciding to accept that gap")
	cli.BoolVar(fs, &cfg.kafka.TLS, "kafka-tls", false, "connect to Kafka over TLS (on by itself when a --kafka-tls-* file is given)")
	fs.StringVar(&cfg.kafka.CAFile, "kafka-tls-ca-file", "", "PEM file of the CA that signed the brokers' certificates (default: the system's roots)")
	fs.StringVar(&cfg.kafka.CertFile, "kafka-tls-cert-file", "", "PEM client certificate, for brokers that require one (with --kafka-tls-key-file)")
	fs.StringVar(&cfg.kafka.KeyFile, "kafka-tls-key-file", "", "PEM private key of the client certificate")
	fs.StringVar(&cfg.kafka.ServerName, "kafka-tls-server-name", "", "host name to verify in the brokers' certificates (default: the host dialed)")
	fs.StringVar(&cfg.kafka.Mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL)")
	fs.StringVar(&cfg.kafka.Username, "kafka-sasl-username", "", "SASL user")
	fs.StringVar(&cfg.kafka.PasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password (or set WALRELAY_KAFKA_SASL_PASSWORD; there is no password flag)")
	fs.StringVar(&cfg.pgURLFile, "pg-url-file", "", "file holding the PostgreSQL connection string, instead of --pg-url (keeps the password off the command line)")
	cli.BoolVar(fs, &cfg.rc.RequireVerifiedTLS, "pg-require-verified-tls", true, "refuse to start (exit 2) when a PostgreSQL host other than loopback (localhost, 127.0.0.0/8, ::1, a socket) is not reached with sslmode=verify-full, in --pg-url and --pg-standby-url; false: connect anyway and log a warning")
	cli.BoolVar(fs, &cfg.kafka.AllowPlainWithoutTLS, "kafka-allow-sasl-plain-without-tls", false, "let --kafka-sasl-mechanism PLAIN send the password in the clear when Kafka is reached without --kafka-tls (for a network that protects the connection itself); without it that is refused (exit 2)")
	cli.BoolVar(fs, &cfg.sc.ExactlyOnce, "exactly-once", false, "produce each PostgreSQL transaction inside a Kafka transaction with an LSN checkpoint on --checkpoint-topic, and skip on restart what a committed checkpoint covers: read_committed consumers see every event once (see README, Exactly-once)")
	fs.StringVar(&cfg.sc.CheckpointTopic, "checkpoint-topic", kafkastate.DefaultTopic, "compacted Kafka topic of walrelay's checkpoints: the marker of each slot walrelay streamed from (a slot whose marker remains is never created again) and, with --exactly-once, the checkpoint committed in each Kafka transaction; created with cleanup.policy=compact under --create-topics")
	fs.StringVar(&cfg.sc.TransactionalID, "transactional-id", "", "Kafka transactional.id with --exactly-once (default walrelay-<slot>): a second walrelay with the same id fences the first")
	cli.DurationVar(fs, &cfg.sc.TransactionTimeout, "kafka-transaction-timeout", 5*time.Minute, "Kafka transaction.timeout.ms with --exactly-once: above --kafka-delivery-timeout, at most the broker's transaction.max.timeout.ms (default 15m); a PostgreSQL transaction not relayed within 3/4 of it stops walrelay (exit 2)")
	cli.DurationVar(fs, &cfg.sc.CommitInterval, "transaction-commit-interval", 100*time.Millisecond, "with --exactly-once, how long a Kafka transaction gathers whole PostgreSQL transactions before it commits (more throughput, more latency)")
	fs.StringVar(&cfg.dc.KeyFormat, "key-converter", decode.FormatString, "record key format, as Kafka Connect's key.converter writes it: string (StringConverter), json (JsonConverter, schemas.enable=false) or json-schema (schemas.enable=true)")
	fs.StringVar(&cfg.dc.ValueFormat, "value-converter", decode.FormatString, "record value format, as Kafka Connect's value.converter writes it: string (StringConverter), json (JsonConverter, schemas.enable=false), json-schema (schemas.enable=true) or bytes (ByteArrayConverter, a bytea payload)")
	fs.StringVar(&cfg.nullableColumns, "nullable-columns", "payload", "columns declared without NOT NULL, comma-separated: json-schema writes \"optional\":true for them (Debezium reads it from the catalog)")
	fs.StringVar(&cfg.envelopeColumns, "envelope-columns", "", "make the value {\"payload\":...,ALIAS:column...} with these column:alias pairs, comma-separated (Debezium's column:envelope:alias placement; needs --value-converter json)")
	fs.StringVar(&cfg.dc.TopicRegex, "topic-regex", "", "route like Debezium's route.topic.regex: matched against the whole --route-column value, --topic is then its replacement ($1, ${name}); no match: the value is the topic (empty: --topic is a template)")
	fs.StringVar(&cfg.dc.RouteColumn, "route-column", "aggregatetype", "column --topic-regex is matched against (Debezium's route.by.field)")
	fs.StringVar(&cfg.dc.PartitionColumn, "partition-column", "", "integer column whose value is the record's partition, NULL: the key hash (Debezium's column:partition placement; a partition the topic lacks makes a poison event)")
	fs.StringVar(&cfg.dc.TimestampColumn, "timestamp-column", "", "timestamp (without time zone) column whose value, as UTC, is the record's timestamp, NULL: the commit time (Debezium's table.field.event.timestamp; default: the commit time); a record older than its topic's retention.ms (7 days by default) is deleted by the broker's next retention check, before consumers may read it")
	cli.BoolVar(fs, &cfg.dc.ExpandJSONPayload, "expand-json-payload", false, "a payload starting with { or [ is written as the JSON itself, with the schema Debezium infers (Debezium's table.expand.json.payload; needs --value-converter json or json-schema)")
	cli.BoolVar(fs, &cfg.dc.ExpandJSONNullAsBytes, "expand-json-null-as-bytes", false, "with --expand-json-payload, a null JSON member gets an optional bytes schema instead of being left out (Debezium's table.json.payload.null.behavior=optional_bytes)")
	fs.StringVar(&cfg.dc.SchemaNamePrefix, "debezium-topic-prefix", "", "Debezium's topic.prefix: with --envelope-columns and --value-converter json-schema it begins the value struct's name (PREFIX.SCHEMA.TABLE.ROUTE.Value)")
	fs.StringVar(&cfg.dc.SchemaVersionColumn, "schema-version-column", "", "integer column whose value is the version of the value struct's schema with --envelope-columns and --value-converter json-schema (Debezium's table.field.event.schema.version)")
	cli.BoolVar(fs, &cfg.dc.TombstoneOnEmptyPayload, "tombstone-on-empty-payload", false, "a NULL or blank payload becomes a tombstone (no value), as Debezium's route.tombstone.on.empty.payload")
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
