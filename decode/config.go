package decode

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decode/connect"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// HeaderColumn adds a Kafka header named Header from column Column.
type HeaderColumn struct {
	Column string
	Header string
}

// Config says which tables are outboxes and how their columns map to
// records. The zero value of each field means its default.
type Config struct {
	// Tables are the outbox tables, schema-qualified ("public.outbox").
	// Default: public.outbox.
	Tables []string
	// IDColumn is the event id, sent as header "id". Default "id".
	IDColumn string
	// KeyColumn is the record key. Default "aggregateid".
	KeyColumn string
	// PayloadColumn is the record value. Default "payload".
	PayloadColumn string
	// HeaderColumns adds one header per entry. Default none.
	HeaderColumns []HeaderColumn
	// TraceContextColumn is the optional column holding each event's trace
	// context (a java.util.Properties text or a W3C traceparent; package
	// tracing reads it); "-" for none. A table without it has no context.
	// Default "tracingspancontext" (Debezium's).
	TraceContextColumn string
	// Topic is the topic template. Default "outbox.event.${aggregatetype}".
	Topic string
	// MaxPartBytes bounds the memory the events of one Tx part hold
	// (Event.Held, poison events included); a larger transaction is handed
	// on in several parts. Default 1 MiB.
	MaxPartBytes int
	// MaxRecordBytes is the largest record Kafka accepts (the broker's
	// message.max.bytes); a larger event is a poison event (ErrTooLarge).
	// Default 0: no limit here.
	MaxRecordBytes int
	// KeyFormat and ValueFormat are the formats of the record key and
	// value (FormatString, FormatJSON, FormatJSONSchema, FormatBytes: the
	// Connect converter walrelay writes as). Default FormatString.
	KeyFormat   string
	ValueFormat string
	// NullableColumns are the columns FormatJSONSchema declares
	// "optional":true (Debezium: the columns without NOT NULL); the
	// others are "optional":false. Default none.
	NullableColumns []string
	// EnvelopeFields make the value an object holding the payload as
	// "payload" and each column as its alias, in this order (the router's
	// column:envelope:alias placement). FormatJSON only. Default none.
	EnvelopeFields []EnvelopeField
	// TopicRegex, when set, routes as Kafka Connect's RegexRouter: Topic is
	// then a replacement string ($n, ${name} refer to the groups of
	// TopicRegex matched against the whole value of RouteColumn; no match:
	// the value itself is the topic), not a template. Default "": Topic is
	// a template.
	TopicRegex string
	// RouteColumn is the column TopicRegex is matched against. Default
	// "aggregatetype".
	RouteColumn string
	// TombstoneOnEmptyPayload makes a record whose payload is NULL or, for
	// a payload that is not bytea, only characters up to U+0020, a
	// tombstone (no value; the router's route.tombstone.on.empty.payload).
	// Default false: a NULL payload is a null value in FormatString and
	// FormatBytes, the JSON null in the json formats.
	TombstoneOnEmptyPayload bool
	// PartitionColumn, when set, is an integer column whose value is the
	// record's partition (the router's column:partition placement); a NULL
	// leaves the partition to the key hash. Default "": the key hash.
	PartitionColumn string
	// TimestampColumn, when set, is a timestamp (without time zone) column
	// whose value, read as UTC, is the record's timestamp in milliseconds
	// (the router's table.field.event.timestamp); a NULL leaves the commit
	// time. Default "": the commit time.
	TimestampColumn string
	// ExpandJSONPayload makes a payload whose text starts with '{' or '['
	// the JSON value itself, as the router's table.expand.json.payload
	// (decode/connect): FormatJSON writes the object, FormatJSONSchema with the
	// schema Debezium infers from it. FormatJSON and FormatJSONSchema
	// only; FormatBytes payloads are never expanded. Default false.
	ExpandJSONPayload bool
	// ExpandJSONNullAsBytes gives a null JSON member an optional bytes
	// schema instead of leaving it out (the router's
	// table.json.payload.null.behavior=optional_bytes). Default false.
	ExpandJSONNullAsBytes bool
	// SchemaNamePrefix is Debezium's topic.prefix, the start of the
	// struct name FormatJSONSchema gives a value with EnvelopeFields
	// (PREFIX.SCHEMA.TABLE.ROUTE.Value). Needed with both. Default "".
	SchemaNamePrefix string
	// SchemaVersionColumn, when set, is an integer column whose value is
	// the version FormatJSONSchema gives a value with EnvelopeFields (the
	// router's table.field.event.schema.version); it changes no other
	// record. Default "": no version.
	SchemaVersionColumn string
	// ResolvePartitionRoots holds back each relation that is not an outbox
	// until the caller says whether it is a leaf partition of one, from its
	// PostgreSQL partition root (Unresolved, Resolve); a change to it before
	// that is an error. Default false: such a relation is another table.
	ResolvePartitionRoots bool
	// Messages makes each transactional logical decoding message
	// (pg_logical_emit_message(true, MessagePrefix, content)) an event:
	// its content is a JSON object keyed by the mapped column names
	// (message.go). Default false: messages are skipped.
	Messages bool
	// MessagePrefix is the prefix of the messages that are events.
	// Default "outbox".
	MessagePrefix string
	// Types resolves the column types that are not built in (domains,
	// enums, citext) to the built-in types their values are read as
	// (typeres.go); the check at start fills it from the catalog. A mapped
	// column of a type it lacks takes no type its flag does not take.
	// Default none.
	Types Types
	// LiveFrom is the WAL position at which the check at start read the
	// outbox tables' columns. An outbox Relation message that no longer
	// matches the mapping in a transaction that commits at or after it
	// shows a change made since (ErrSchemaChanged: the stream stops); in
	// one that commits before it, rows written under the table or the
	// publication as they were before that check, which no flag can match
	// now: its inserts are poison events, as before. Default 0: every
	// change is one made since.
	LiveFrom pglogrepl.LSN
	// Columns are the outbox tables' columns (schema.table: names in
	// column order) as the check at start read them at LiveFrom. A
	// Relation message from before LiveFrom that lacks a mapped column
	// but has, in its place, one of a name the table no longer has, is
	// mapped with that column (a rename since). Default none.
	Columns map[string][]string
	// NoTables: no table is an outbox (the message source alone); Tables
	// is ignored. Default false.
	NoTables bool
}

func (c Config) withDefaults() Config {
	if len(c.Tables) == 0 {
		c.Tables = []string{"public.outbox"}
	}
	if c.IDColumn == "" {
		c.IDColumn = "id"
	}
	if c.KeyColumn == "" {
		c.KeyColumn = "aggregateid"
	}
	if c.PayloadColumn == "" {
		c.PayloadColumn = "payload"
	}
	if c.Topic == "" {
		c.Topic = "outbox.event.${aggregatetype}"
	}
	if c.MaxPartBytes <= 0 {
		c.MaxPartBytes = 1 << 20
	}
	if c.KeyFormat == "" {
		c.KeyFormat = FormatString
	}
	if c.ValueFormat == "" {
		c.ValueFormat = FormatString
	}
	if c.RouteColumn == "" {
		c.RouteColumn = "aggregatetype"
	}
	if c.MessagePrefix == "" {
		c.MessagePrefix = "outbox"
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	for _, t := range c.Tables {
		if _, _, err := SplitTable(t); err != nil {
			errs = append(errs, err)
		}
	}
	if c.TopicRegex != "" {
		if _, err := connect.CompileRegexRouter(c.TopicRegex, c.Topic); err != nil {
			errs = append(errs, err)
		}
	} else if _, err := ParseTemplate(c.Topic); err != nil {
		errs = append(errs, err)
	}
	if !connect.ValidFormat(c.KeyFormat) {
		errs = append(errs, fmt.Errorf("key format %q: want %s", c.KeyFormat, strings.Join(connect.Formats()[:3], ", ")))
	} else if c.KeyFormat == FormatBytes {
		errs = append(errs, fmt.Errorf("key format %q: the key column is text or an integer; want %s", c.KeyFormat, strings.Join(connect.Formats()[:3], ", ")))
	}
	if !connect.ValidFormat(c.ValueFormat) {
		errs = append(errs, fmt.Errorf("value format %q: want %s", c.ValueFormat, strings.Join(connect.Formats(), ", ")))
	}
	if len(c.EnvelopeFields) > 0 && c.ValueFormat != FormatJSON && c.ValueFormat != FormatJSONSchema {
		errs = append(errs, fmt.Errorf("envelope fields need value format %s or %s (JsonConverter), not %q", FormatJSON, FormatJSONSchema, c.ValueFormat))
	}
	if len(c.EnvelopeFields) > 0 && c.ValueFormat == FormatJSONSchema && c.SchemaNamePrefix == "" {
		errs = append(errs, fmt.Errorf("envelope fields with value format %s need the schema name prefix (--debezium-topic-prefix: Debezium's topic.prefix, which names the value's struct)", FormatJSONSchema))
	}
	if c.ExpandJSONPayload && c.ValueFormat == FormatString {
		errs = append(errs, fmt.Errorf("expanding JSON payloads needs value format %s or %s: StringConverter writes an expanded payload as Java's Struct.toString(), which walrelay does not reproduce", FormatJSON, FormatJSONSchema))
	}
	aliases := map[string]bool{"payload": true}
	for _, f := range c.EnvelopeFields {
		if f.Column == "" || f.Alias == "" {
			errs = append(errs, fmt.Errorf("envelope field %q:%q: both the column and the alias are needed (column:alias)", f.Column, f.Alias))
		}
		if aliases[f.Alias] {
			errs = append(errs, fmt.Errorf("envelope field %q is given twice (\"payload\" is always the payload)", f.Alias))
		}
		aliases[f.Alias] = true
	}
	if c.NoTables && !c.Messages {
		errs = append(errs, errors.New("no source: with no outbox table, the message source must be on (--source tables, messages or tables,messages)"))
	}
	if c.Messages && c.ValueFormat == FormatBytes {
		errs = append(errs, fmt.Errorf("--value-converter %s takes a bytea payload, and a message's payload is JSON: use string or json with --source messages", FormatBytes))
	}
	seen := map[string]bool{"id": true}
	for _, h := range c.HeaderColumns {
		if h.Column == "" || h.Header == "" {
			errs = append(errs, fmt.Errorf("header column %q:%q: both the column and the header name are needed (column:header)", h.Column, h.Header))
		}
		if seen[h.Header] {
			errs = append(errs, fmt.Errorf("header %q is given twice (\"id\" is always the event id)", h.Header))
		}
		seen[h.Header] = true
	}
	return errors.Join(errs...)
}

// SplitTable splits "schema.table" (or "table", meaning public) into its
// parts (pgoutput.SplitTable: the one parser of these names).
func SplitTable(s string) (schema, table string, err error) { return pgoutput.SplitTable(s) }

// ErrTruncated is wrapped by every error about a message shorter than its
// fields say (pgoutput.ErrTruncated).
var ErrTruncated = pgoutput.ErrTruncated

// Record formats (connect.FormatString and so on): the Kafka Connect
// converter walrelay writes keys and values as.
const (
	FormatString     = connect.FormatString
	FormatJSON       = connect.FormatJSON
	FormatJSONSchema = connect.FormatJSONSchema
	FormatBytes      = connect.FormatBytes
)

// EnvelopeField puts column Column into the value as field Alias (the
// router's table.fields.additional.placement=column:envelope:alias).
type EnvelopeField struct {
	Column string
	Alias  string
}

// RegisterFlags binds c's fields to walrelay's flags, with the command
// line's defaults and help. --table, --source, --header-columns,
// --envelope-columns, --nullable-columns and --kafka-max-message-bytes are
// the command's: it parses them into Tables, HeaderColumns and the others.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.MessagePrefix, "message-prefix", "outbox", "prefix of the logical decoding messages that are events, with --source messages")
	fs.StringVar(&c.Topic, "topic", "outbox.event.${aggregatetype}", "topic template over column names")
	fs.StringVar(&c.IDColumn, "id-column", "id", "column holding the event id (header \"id\")")
	fs.StringVar(&c.KeyColumn, "key-column", "aggregateid", "column holding the record key")
	fs.StringVar(&c.PayloadColumn, "payload-column", "payload", "column holding the record value")
	fs.StringVar(&c.KeyFormat, "key-converter", FormatString, "record key format, as Kafka Connect's key.converter writes it: string (StringConverter), json (JsonConverter, schemas.enable=false) or json-schema (schemas.enable=true)")
	fs.StringVar(&c.ValueFormat, "value-converter", FormatString, "record value format, as Kafka Connect's value.converter writes it: string (StringConverter), json (JsonConverter, schemas.enable=false), json-schema (schemas.enable=true) or bytes (ByteArrayConverter, a bytea payload)")
	fs.StringVar(&c.TopicRegex, "topic-regex", "", "route like Debezium's route.topic.regex: matched against the whole --route-column value, --topic is then its replacement ($1, ${name}); no match: the value is the topic (empty: --topic is a template)")
	fs.StringVar(&c.RouteColumn, "route-column", "aggregatetype", "column --topic-regex is matched against (Debezium's route.by.field)")
	fs.StringVar(&c.TraceContextColumn, "trace-context-column", DefaultTraceContextColumn, "optional column holding each event's trace context: a java.util.Properties text with traceparent (Debezium's tracing.span.context.field) or a W3C traceparent; carried into the record's traceparent and tracestate headers, the parent of walrelay's span when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/tracing.md); a table without it relays without; - for none")
	fs.StringVar(&c.PartitionColumn, "partition-column", "", "integer column whose value is the record's partition, NULL: the key hash (Debezium's column:partition placement; a partition the topic lacks makes a poison event)")
	fs.StringVar(&c.TimestampColumn, "timestamp-column", "", "timestamp (without time zone) column whose value, as UTC, is the record's timestamp, NULL: the commit time (Debezium's table.field.event.timestamp; default: the commit time); a record older than its topic's retention.ms (7 days by default) is deleted by the broker's next retention check, before consumers may read it")
	cli.BoolVar(fs, &c.ExpandJSONPayload, "expand-json-payload", false, "a payload starting with { or [ is written as the JSON itself, with the schema Debezium infers (Debezium's table.expand.json.payload; needs --value-converter json or json-schema)")
	cli.BoolVar(fs, &c.ExpandJSONNullAsBytes, "expand-json-null-as-bytes", false, "with --expand-json-payload, a null JSON member gets an optional bytes schema instead of being left out (Debezium's table.json.payload.null.behavior=optional_bytes)")
	fs.StringVar(&c.SchemaNamePrefix, "debezium-topic-prefix", "", "Debezium's topic.prefix: with --envelope-columns and --value-converter json-schema it begins the value struct's name (PREFIX.SCHEMA.TABLE.ROUTE.Value)")
	fs.StringVar(&c.SchemaVersionColumn, "schema-version-column", "", "integer column whose value is the version of the value struct's schema with --envelope-columns and --value-converter json-schema (Debezium's table.field.event.schema.version)")
	cli.BoolVar(fs, &c.TombstoneOnEmptyPayload, "tombstone-on-empty-payload", false, "a NULL or blank payload becomes a tombstone (no value), as Debezium's route.tombstone.on.empty.payload")
}
