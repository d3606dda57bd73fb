package decode

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode/connect"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// PostgreSQL type OIDs walrelay maps.
const (
	oidBool    = 16
	oidBytea   = 17
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidJSON    = 114
	oidBpchar  = 1042
	oidVarchar = 1043
	oidStamp   = 1114 // timestamp (without time zone)
	oidUUID    = 2950
	oidJSONB   = 3802
)

// Reasons an outbox row cannot become a Kafka record. Event.Err wraps one of
// them; the sink decides whether such an event halts the relay or is
// dead-lettered.
var (
	ErrMissingColumn   = errors.New("missing column")
	ErrUnsupportedType = errors.New("unsupported column type")
	ErrNullID          = errors.New("null id")
	ErrNullKey         = errors.New("null key")
	ErrEmptyKey        = errors.New("empty key")
	ErrInvalidTopic    = errors.New("invalid topic")
	ErrBadValue        = errors.New("bad column value")
	ErrTooLarge        = errors.New("record too large")
)

// Reason names the class of a poison event's error for headers and
// metrics: null_key, empty_key, null_id, invalid_topic, missing_column,
// unsupported_type, bad_value, too_large, or other.
func Reason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{ErrNullKey, "null_key"}, {ErrEmptyKey, "empty_key"}, {ErrNullID, "null_id"},
		{ErrInvalidTopic, "invalid_topic"}, {ErrMissingColumn, "missing_column"},
		{ErrUnsupportedType, "unsupported_type"}, {ErrBadValue, "bad_value"}, {ErrTooLarge, "too_large"},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

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
	// (expand.go): FormatJSON writes the object, FormatJSONSchema with the
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
	// ResolvePartitions holds back each relation that is not an outbox
	// until the caller says whether it is a partition of one (Unresolved,
	// Resolve); a change to it before that is an error. Default false:
	// such a relation is another table.
	ResolvePartitions bool
	// Messages makes each transactional logical decoding message
	// (pg_logical_emit_message(true, MessagePrefix, content)) an event:
	// its content is a JSON object keyed by the mapped column names
	// (message.go). Default false: messages are skipped.
	Messages bool
	// MessagePrefix is the prefix of the messages that are events.
	// Default "outbox".
	MessagePrefix string
	// NoTables: no table is an outbox (the message source alone); Tables
	// is ignored. Default false.
	NoTables bool
}

// recordOverhead is a generous bound on what a record adds to its key,
// value and headers inside a record batch (lengths, offsets, timestamps,
// and the batch header when the record is alone in its batch).
const recordOverhead = 128

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

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Field is one column of a row, kept for events that cannot be mapped.
type Field struct {
	Name  string
	Type  uint32 // type OID
	Null  bool
	Value []byte // text form as PostgreSQL sent it
}

// Event is one outbox row, mapped to a Kafka record.
//
// N.B. an event owns its bytes: Key, Value, ID and the header values are
// copied out of the pgoutput message into one allocation (a poison event's
// Row values into another), so that the message is garbage once decoded
// and columns nobody maps (a wide jsonb, a bytea's hex text) are never held
// while the record waits for Kafka. The capacities of those slices add up
// to the allocation, so that counting them counts what is held.
type Event struct {
	Table   string // schema-qualified source table
	Topic   string
	Key     []byte
	Value   []byte // nil for a NULL payload
	ID      []byte
	Headers []Header // extra headers, after "id"
	// Partition is the record's partition when HasPartition
	// (Config.PartitionColumn); otherwise the key hash picks it.
	Partition    int32
	HasPartition bool
	// Timestamp is the record's timestamp when not zero
	// (Config.TimestampColumn); otherwise the commit time.
	Timestamp time.Time
	// Err is set when the row cannot become a record (it wraps one of the
	// Err* reasons above); Row then holds the row as received, except a
	// column dropped for its size (DroppedColumn, DroppedBytes). Key and ID
	// are set if they were read before the error; Value and Headers are
	// nil.
	Err error
	// Reason is set with Err: the class of Err (Reason(Err)) that the
	// dead-letter record's walrelay.error.class header and the dead-letter
	// metric name.
	Reason        string
	Row           []Field
	DroppedColumn string
	DroppedBytes  int
}

// Size is the record bytes the event puts in flight.
func (e *Event) Size() int {
	n := len(e.Topic) + len(e.Key) + len(e.Value) + len(e.ID) + 2
	for _, h := range e.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Sizes of what an event holds besides its bytes.
const (
	eventBytes  = int(unsafe.Sizeof(Event{}))
	headerBytes = int(unsafe.Sizeof(Header{}))
	fieldBytes  = int(unsafe.Sizeof(Field{}))
)

// Held is the memory the event holds until it is produced: the Event
// itself, its headers and row, and the bytes it owns (their capacities).
// Topic, Table, header keys and field names are shared with the relation
// cache and are not counted.
func (e *Event) Held() int {
	n := eventBytes + cap(e.Key) + cap(e.Value) + cap(e.ID) + len(e.Headers)*headerBytes + len(e.Row)*fieldBytes
	for i := range e.Headers {
		n += cap(e.Headers[i].Value)
	}
	for i := range e.Row {
		n += cap(e.Row[i].Value)
	}
	return n
}

// Tx is one committed transaction, or one part of a large one.
type Tx struct {
	Xid        uint32
	CommitLSN  pglogrepl.LSN // the commit record's LSN (BEGIN's final LSN)
	EndLSN     pglogrepl.LSN // the transaction's end LSN; set on the last part only
	CommitTime time.Time
	Events     []Event
	First      bool // the first part of the transaction
	Last       bool // the last part: EndLSN is set
}

// Stats counts what the decoder saw. Read it from the decoding goroutine.
type Stats struct {
	Transactions uint64
	Inserts      uint64 // outbox inserts turned into events
	Ignored      uint64 // updates, deletes and truncates of outbox tables
	OtherTables  uint64 // changes to tables that are not outboxes
	// Messages are the transactional messages of Config.MessagePrefix
	// turned into events; NonTransactional those of the prefix that are
	// not transactional (never events); OtherMessages the messages of
	// other prefixes.
	Messages, NonTransactional, OtherMessages uint64
}

type relation struct {
	qualified string
	outbox    bool
	columns   []pgoutput.Column
	err       error // the relation cannot be mapped; every insert is a poison event

	idIdx, keyIdx, payloadIdx int
	payloadBytea              bool
	headerIdx                 []int
	partIdx, stampIdx         int // -1: not configured
	routeIdx, versionIdx      int // the json-schema envelope's route and version columns; -1: none
	topicParts                []templatePart
	topicCols                 []int
	topics                    map[string]string // rendered template values → validated topic
	topicErrs                 map[string]error

	// The json formats (format.go): what goes before and after the JSON
	// of the key and of the payload, the envelope fields' columns, their
	// `,"alias":` and how each is written.
	keyPre, keySuf, valPre, valSuf string
	keyKind, payloadKind           jsonKind
	envIdx                         []int
	envNames                       []string
	envKinds                       []jsonKind
	// json-schema with envelope fields: the payload column's schema and
	// the struct's fields (the payload's and each placed column's).
	payloadSchema, envFields string

	// Set with Config.ResolvePartitions (see partition.go): pending until
	// Resolve; partition names the partition whose rows are this outbox's;
	// gone is a relation no longer in the catalog; warned once it is logged.
	pending, gone, warned bool
	partition             string
}

// Decoder assembles pgoutput messages into transactions. It is not safe for
// concurrent use.
type Decoder struct {
	cfg       Config
	tables    map[string]bool
	template  Template
	log       *zap.Logger
	relations map[uint32]*relation
	pending   []pgoutput.Relation // relations awaiting Resolve, oldest first

	cur   *Tx
	tx    pgoutput.TxState // Begin and Commit: the same code replication follows
	bytes int
	cols  []pgoutput.TupleCol
	buf   []byte
	re    *connect.RegexRouter
	// Scratch for the json formats: the key, the value, a bytea's bytes.
	kbuf, vbuf, tmp []byte
	msg             messageSource // Config.Messages (message.go)
	// structs caches the json-schema envelope's struct schema as Debezium
	// does (format.go, envelopeSchema).
	structs map[string]string

	Stats Stats
}

// New returns a decoder for cfg.
func New(cfg Config, log *zap.Logger) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tmpl, _ := ParseTemplate(cfg.Topic)
	d := &Decoder{
		cfg:       cfg,
		tables:    make(map[string]bool),
		template:  tmpl,
		log:       log.Named("decode"),
		relations: make(map[uint32]*relation),
	}
	if cfg.TopicRegex != "" {
		d.re, _ = connect.CompileRegexRouter(cfg.TopicRegex, cfg.Topic)
		d.template = Template{src: cfg.Topic, parts: []templatePart{{column: cfg.RouteColumn}}}
	}
	for _, t := range cfg.Tables {
		if cfg.NoTables {
			break
		}
		s, n, _ := SplitTable(t)
		d.tables[s+"."+n] = true
	}
	if cfg.Messages {
		if err := d.initMessages(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// InTx reports whether a transaction has begun and not yet committed.
func (d *Decoder) InTx() bool { return d.tx.InTx() }

// Decode consumes one pgoutput message (the WAL data of one XLogData). It
// returns a Tx part when one is complete: at every Commit, and inside a
// transaction whenever what its events hold reaches Config.MaxPartBytes.
// Nothing returned points into msg: the caller may reuse or drop it.
//
// N.B. parse by first byte, one method per kind, as pglogrepl's Parse; the
// kinds are not boxed into an interface for a type switch, which would
// allocate once per row.
func (d *Decoder) Decode(msg []byte) (*Tx, error) {
	if len(msg) == 0 {
		return nil, errors.New("empty pgoutput message")
	}
	switch msg[0] {
	case pgoutput.KindBegin:
		return nil, d.begin(msg)
	case pgoutput.KindCommit:
		return d.commit(msg)
	case pgoutput.KindRelation:
		return nil, d.relationMessage(msg)
	case pgoutput.KindInsert:
		return d.insert(msg)
	case pgoutput.KindUpdate:
		return nil, d.update(msg)
	case pgoutput.KindDelete:
		return nil, d.delete(msg)
	case pgoutput.KindTruncate:
		return nil, d.truncate(msg)
	case pgoutput.KindLogicalMessage:
		return d.message(msg)
	case pgoutput.KindType, pgoutput.KindOrigin:
		return nil, skip(msg)
	default:
		return nil, fmt.Errorf("unexpected pgoutput message type %q (streaming of in-progress transactions is not requested)", msg[0])
	}
}

func (d *Decoder) begin(msg []byte) error {
	if _, err := d.tx.Begin(msg); err != nil {
		return err
	}
	d.newPart(true)
	return nil
}

func (d *Decoder) commit(msg []byte) (*Tx, error) {
	c, err := d.tx.Commit(msg)
	if err != nil {
		return nil, err
	}
	tx := d.cur
	tx.EndLSN, tx.Last = c.EndLSN, true
	d.cur = nil
	d.Stats.Transactions++
	return tx, nil
}

func (d *Decoder) relationMessage(msg []byte) error {
	r, err := pgoutput.ParseRelation(msg)
	if err != nil {
		return err
	}
	d.addRelation(r)
	return nil
}

// update and delete read the whole message, so that a truncated one is an
// error, and count it; neither is ever an event. N.B. their tuples go to
// d.cols' room and are dropped: a larger one allocates, a rare case (the
// publication sends inserts only, by default).
func (d *Decoder) update(msg []byte) error {
	if !d.tx.InTx() {
		return errors.New("U message outside a transaction: protocol out of sync")
	}
	u, err := pgoutput.ParseUpdate(msg, d.cols)
	return d.change(u.RelationID, err)
}

func (d *Decoder) delete(msg []byte) error {
	if !d.tx.InTx() {
		return errors.New("D message outside a transaction: protocol out of sync")
	}
	m, err := pgoutput.ParseDelete(msg, d.cols)
	return d.change(m.RelationID, err)
}

// change counts an update or delete of relation id that parsed with err.
func (d *Decoder) change(id uint32, err error) error {
	if err != nil {
		return err
	}
	rel, err := d.relation(id, nil)
	if err != nil {
		return err
	}
	d.count(rel.outbox)
	return nil
}

func (d *Decoder) truncate(msg []byte) error {
	if !d.tx.InTx() {
		return errors.New("truncate outside a transaction: protocol out of sync")
	}
	m, err := pgoutput.ParseTruncate(msg)
	if err != nil {
		return err
	}
	for _, id := range m.RelationIDs {
		rel, err := d.relation(id, nil)
		if err != nil {
			return err
		}
		d.count(rel.outbox)
	}
	return nil
}

// skip reads a type or origin message only to reject a truncated one:
// they carry no outbox rows.
func skip(msg []byte) error {
	var err error
	switch msg[0] {
	case pgoutput.KindType:
		_, err = pgoutput.ParseType(msg)
	case pgoutput.KindOrigin:
		_, err = pgoutput.ParseOrigin(msg)
	}
	return err
}

func (d *Decoder) count(outbox bool) {
	if outbox {
		d.Stats.Ignored++
	} else {
		d.Stats.OtherTables++
	}
}

func (d *Decoder) relation(id uint32, err error) (*relation, error) {
	if err != nil {
		return nil, err
	}
	rel, ok := d.relations[id]
	if !ok {
		return nil, fmt.Errorf("change for relation %d before its Relation message: protocol out of sync", id)
	}
	if rel.pending {
		return nil, fmt.Errorf("change for relation %s (oid %d) before Resolve said whether it is a partition of an outbox", rel.qualified, id)
	}
	return rel, nil
}

func (d *Decoder) newPart(first bool) {
	b := d.tx.Current()
	d.cur = &Tx{
		Xid:        b.Xid,
		CommitLSN:  b.FinalLSN,
		CommitTime: b.CommitTime,
		First:      first,
	}
	d.bytes = 0
}

func (d *Decoder) insert(msg []byte) (*Tx, error) {
	if !d.tx.InTx() {
		return nil, errors.New("insert outside a transaction: protocol out of sync")
	}
	ins, err := pgoutput.ParseInsert(msg, d.cols)
	d.cols = ins.New
	rel, rerr := d.relation(ins.RelationID, nil)
	switch {
	case err != nil && rerr == nil:
		return nil, fmt.Errorf("insert into %s: %w", rel.qualified, err)
	case err != nil:
		return nil, err
	case rerr != nil:
		return nil, rerr
	}
	if !rel.outbox {
		if rel.gone && !rel.warned {
			d.warnGone(rel)
		}
		d.Stats.OtherTables++
		return nil, nil
	}
	if rel.partition != "" && !rel.warned {
		d.warnPartition(rel)
	}
	d.Stats.Inserts++
	return d.add(d.event(rel, d.cols)), nil
}

// add appends ev to the current part and returns the part when it is full.
func (d *Decoder) add(ev Event) *Tx {
	d.cur.Events = append(d.cur.Events, ev)
	// N.B. what the event holds, poison events included: a part is a
	// bound on memory, not only on record bytes.
	d.bytes += d.cur.Events[len(d.cur.Events)-1].Held()
	if d.bytes < d.cfg.MaxPartBytes {
		return nil
	}
	tx := d.cur
	d.newPart(false)
	return tx
}

// mapRelation resolves the configured column mapping against a relation.
func (d *Decoder) mapRelation(m pgoutput.Relation) *relation {
	return d.mapRelationAs(m, m.Namespace+"."+m.Name)
}

// mapRelationAs maps relation m as table qualified: itself, or the outbox
// m is a partition of.
func (d *Decoder) mapRelationAs(m pgoutput.Relation, qualified string) *relation {
	rel := newRelation(qualified, m.Columns)
	rel.outbox = d.tables[rel.qualified]
	if !rel.outbox {
		return rel
	}
	return d.mapOutbox(rel, m)
}

// newRelation is a relation qualified with columns, no column mapped yet.
func newRelation(qualified string, columns []pgoutput.Column) *relation {
	return &relation{
		qualified: qualified,
		columns:   columns,
		idIdx:     -1, keyIdx: -1, payloadIdx: -1, partIdx: -1, stampIdx: -1, routeIdx: -1, versionIdx: -1,
	}
}

// mapOutbox maps the columns of outbox rel, described by m.
func (d *Decoder) mapOutbox(rel *relation, m pgoutput.Relation) *relation {
	index := func(name string) int {
		for i, c := range m.Columns {
			if c.Name == name {
				return i
			}
		}
		return -1
	}
	var errs []error
	// need returns the index of column name, or -1 when the relation has no
	// such column or its type is not one flag takes.
	need := func(name, flag string) int {
		i := index(name)
		if i < 0 {
			errs = append(errs, fmt.Errorf("%w: table %s has no column %q (%s)", ErrMissingColumn, rel.qualified, name, flag))
			return -1
		}
		if err := CheckColumnType(flag, m.Columns[i].TypeOID); err != nil {
			errs = append(errs, fmt.Errorf("column %s.%s has type oid %d: %w", rel.qualified, name, m.Columns[i].TypeOID, err))
			return -1
		}
		return i
	}
	rel.idIdx = need(d.cfg.IDColumn, "--id-column")
	rel.keyIdx = need(d.cfg.KeyColumn, "--key-column")
	rel.payloadIdx = need(d.cfg.PayloadColumn, "--payload-column")
	if rel.payloadIdx >= 0 {
		rel.payloadBytea = m.Columns[rel.payloadIdx].TypeOID == oidBytea
	}
	for _, h := range d.cfg.HeaderColumns {
		rel.headerIdx = append(rel.headerIdx, need(h.Column, "--header-columns"))
	}
	rel.topicParts = d.template.parts
	topicFlag := "--topic"
	if d.re != nil {
		topicFlag = "--route-column"
	}
	for _, p := range d.template.parts {
		if p.column != "" {
			rel.topicCols = append(rel.topicCols, need(p.column, topicFlag))
		}
	}
	for _, f := range d.cfg.EnvelopeFields {
		rel.envIdx = append(rel.envIdx, need(f.Column, "--envelope-columns"))
	}
	if d.cfg.PartitionColumn != "" {
		rel.partIdx = need(d.cfg.PartitionColumn, "--partition-column")
	}
	if d.cfg.TimestampColumn != "" {
		rel.stampIdx = need(d.cfg.TimestampColumn, "--timestamp-column")
	}
	if len(d.cfg.EnvelopeFields) > 0 && d.cfg.ValueFormat == FormatJSONSchema {
		rel.routeIdx = need(d.cfg.RouteColumn, "--route-column")
		if d.cfg.SchemaVersionColumn != "" {
			rel.versionIdx = need(d.cfg.SchemaVersionColumn, "--schema-version-column")
		}
	}
	if rel.idIdx >= 0 && rel.keyIdx >= 0 && rel.payloadIdx >= 0 && !slices.Contains(rel.envIdx, -1) {
		if err := d.mapFormats(rel, m.Columns); err != nil {
			errs = append(errs, err)
		}
	}
	rel.topics = make(map[string]string)
	rel.topicErrs = make(map[string]error)
	rel.err = errors.Join(errs...)
	if rel.err != nil {
		d.log.Warn("outbox table cannot be mapped; its inserts are poison events",
			zap.String("table", rel.qualified), zap.Error(rel.err))
	}
	return rel
}

// The type OIDs a mapped column may have, by the flag that names it; a flag
// not listed takes any type (its text form is used as sent).
var columnTypes = map[string][]uint32{
	"--id-column":        {oidText, oidVarchar, oidBpchar, oidUUID, oidInt8, oidInt4, oidInt2},
	"--key-column":       {oidText, oidVarchar, oidBpchar, oidUUID, oidInt8, oidInt4, oidInt2},
	"--payload-column":   {oidJSONB, oidJSON, oidText, oidVarchar, oidBytea},
	"--route-column":     {oidText, oidVarchar, oidBpchar},
	"--envelope-columns": {oidText, oidVarchar, oidBpchar, oidUUID, oidInt8, oidInt4, oidInt2, oidBool, oidJSON, oidJSONB, oidBytea},
	// N.B. what Debezium takes: the router reads the partition with
	// Struct.getInt32 (an INT32 column: integer) and the timestamp with
	// getInt64 of an io.debezium.time.(Micro)Timestamp (timestamp without
	// time zone); any other type fails its task at every record.
	"--partition-column": {oidInt4},
	// N.B. getInt32 too (only with envelope fields).
	"--schema-version-column": {oidInt4},
	"--timestamp-column":      {oidStamp},
}

// CheckColumnType returns an error wrapping ErrUnsupportedType when a
// column of type oid cannot be the column flag (--id-column, --key-column,
// --payload-column, --header-columns, --topic) names; it names the types
// the flag takes. The decoder and the check at start use it both.
func CheckColumnType(flag string, oid uint32) error {
	set, ok := columnTypes[flag]
	if !ok || oidIn(oid, set) {
		return nil
	}
	return fmt.Errorf("%w: %s takes %s", ErrUnsupportedType, flag, typeNames(set))
}

func oidIn(oid uint32, set []uint32) bool {
	for _, o := range set {
		if o == oid {
			return true
		}
	}
	return false
}

var typeName = map[uint32]string{
	oidBool: "boolean", oidBytea: "bytea", oidInt8: "bigint", oidInt2: "smallint", oidInt4: "integer",
	oidText: "text", oidJSON: "json", oidBpchar: "char", oidVarchar: "varchar", oidUUID: "uuid", oidJSONB: "jsonb",
	oidStamp: "timestamp (without time zone)",
}

func typeNames(set []uint32) string {
	names := make([]string, len(set))
	for i, o := range set {
		names[i] = typeName[o]
	}
	return strings.Join(names, ", ")
}

// event maps one inserted row, copying what the event keeps out of the
// message.
func (d *Decoder) event(rel *relation, cols []pgoutput.TupleCol) Event {
	var id, key []byte // as far as they were read: a poison event keeps them
	fail := func(err error) Event { return poisonEvent(rel, cols, id, key, err, -1) }
	if rel.err != nil {
		// N.B. the id and the key, when their columns can be mapped, so
		// that the dead-letter record names the event.
		if len(cols) == len(rel.columns) {
			if rel.idIdx >= 0 && cols[rel.idIdx].Kind == pgoutput.KindText {
				id = cols[rel.idIdx].Data
			}
			if rel.keyIdx >= 0 && cols[rel.keyIdx].Kind == pgoutput.KindText {
				key = cols[rel.keyIdx].Data
			}
		}
		return fail(rel.err)
	}
	if len(cols) != len(rel.columns) {
		return fail(fmt.Errorf("%w: row has %d columns, relation %s has %d", ErrBadValue, len(cols), rel.qualified, len(rel.columns)))
	}
	switch c := cols[rel.idIdx]; c.Kind {
	case pgoutput.KindText:
		id = c.Data
	case pgoutput.KindNull:
		return fail(fmt.Errorf("%w: column %q is NULL", ErrNullID, d.cfg.IDColumn))
	default:
		return fail(fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.IDColumn, kindName(c.Kind)))
	}
	if len(id) == 0 {
		return fail(fmt.Errorf("%w: column %q is an empty string", ErrNullID, d.cfg.IDColumn))
	}
	switch c := cols[rel.keyIdx]; c.Kind {
	case pgoutput.KindText:
		key = c.Data
	case pgoutput.KindNull:
		return fail(fmt.Errorf("%w: column %q is NULL", ErrNullKey, d.cfg.KeyColumn))
	default:
		return fail(fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.KeyColumn, kindName(c.Kind)))
	}
	if len(key) == 0 {
		return fail(fmt.Errorf("%w: column %q is an empty string", ErrEmptyKey, d.cfg.KeyColumn))
	}
	// The payload and the header values as sent; a bytea is decoded when
	// it is copied.
	p := cols[rel.payloadIdx]
	switch p.Kind {
	case pgoutput.KindNull, pgoutput.KindText:
	default:
		return fail(fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.PayloadColumn, kindName(p.Kind)))
	}
	if p.Kind == pgoutput.KindText && rel.payloadBytea && !isHexBytea(p.Data) {
		return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, errByteaFormat))
	}
	// N.B. the router's tombstone test: a NULL payload, or a text one
	// that Java's trim() empties (a bytea's ByteBuffer never prints
	// empty).
	tomb := d.cfg.TombstoneOnEmptyPayload && (p.Kind == pgoutput.KindNull || !rel.payloadBytea && connect.JavaBlank(p.Data))
	var value []byte // the value in a json format, in d.vbuf
	var valueLen int
	switch {
	case tomb:
	case d.cfg.ValueFormat == FormatJSON || d.cfg.ValueFormat == FormatJSONSchema:
		v, err := d.encodeValue(rel, cols)
		if err != nil {
			return fail(err)
		}
		value, valueLen = v, len(v)
	default:
		valueLen = decodedLen(p, rel.payloadBytea)
	}
	keyData := key
	if d.cfg.KeyFormat != FormatString {
		k, err := d.encodeKey(rel, key)
		if err != nil {
			return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.KeyColumn, err))
		}
		keyData = k
	}
	n := len(id) + len(keyData) + valueLen
	size := len(id) + len(keyData) + valueLen + 2 // Event.Size of the result
	for i, ci := range rel.headerIdx {
		c := cols[ci]
		switch c.Kind {
		case pgoutput.KindText, pgoutput.KindNull:
		default:
			return fail(fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.HeaderColumns[i].Column, kindName(c.Kind)))
		}
		bytea := rel.columns[ci].TypeOID == oidBytea
		if c.Kind == pgoutput.KindText && bytea && !isHexBytea(c.Data) {
			return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.HeaderColumns[i].Column, errByteaFormat))
		}
		l := decodedLen(c, bytea)
		n += l
		size += len(d.cfg.HeaderColumns[i].Header) + l
	}
	topic, err := d.topic(rel, cols)
	if err != nil {
		return fail(err)
	}
	part, hasPart, err := d.partition(rel, cols)
	if err != nil {
		return fail(err)
	}
	stamp, err := d.timestamp(rel, cols)
	if err != nil {
		return fail(err)
	}
	size += len(topic)
	if max := d.cfg.MaxRecordBytes; max > 0 && size+recordOverhead > max {
		// N.B. the payload is not copied: the poison event keeps the rest
		// of the row for its dead-letter record.
		ev := poisonEvent(rel, cols, id, key, fmt.Errorf("%w: the record takes about %d bytes, Kafka accepts %d (--kafka-max-message-bytes; the broker's message.max.bytes)", ErrTooLarge, size+recordOverhead, max), rel.payloadIdx)
		ev.Topic = topic
		ev.DroppedColumn = d.cfg.PayloadColumn
		ev.DroppedBytes = len(p.Data)
		return ev
	}

	// One allocation for the event's bytes: id, header values, key, value.
	buf := grow(n)
	ev := Event{Table: rel.qualified, Topic: topic, Partition: part, HasPartition: hasPart, Timestamp: stamp}
	var off int
	ev.ID, off = put(buf, off, id)
	if len(rel.headerIdx) > 0 {
		ev.Headers = make([]Header, len(rel.headerIdx))
		for i, ci := range rel.headerIdx {
			ev.Headers[i].Key = d.cfg.HeaderColumns[i].Header
			c := cols[ci]
			if c.Kind == pgoutput.KindNull {
				continue
			}
			if rel.columns[ci].TypeOID == oidBytea {
				ev.Headers[i].Value, off, err = putBytea(buf, off, c.Data)
			} else {
				ev.Headers[i].Value, off = put(buf, off, c.Data)
			}
			if err != nil {
				return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.HeaderColumns[i].Column, err))
			}
		}
	}
	ev.Key, off = put(buf, off, keyData)
	switch {
	case tomb:
	case value != nil:
		ev.Value, off = put(buf, off, value)
	case p.Kind == pgoutput.KindText:
		if rel.payloadBytea {
			ev.Value, off, err = putBytea(buf, off, p.Data)
		} else {
			ev.Value, off = put(buf, off, p.Data)
		}
		if err != nil {
			return fail(fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, err))
		}
	}
	giveRest(buf, off, &ev.Key, &ev.Value)
	return ev
}

// grow returns an empty slice with room for n bytes, its capacity what the
// allocator really gives (its size class), so that it can be counted.
func grow(n int) []byte {
	if n == 0 {
		return nil
	}
	return slices.Grow([]byte(nil), n)
}

// put copies b to buf[off:] and returns the copy, its capacity its length
// (the last piece of an allocation is given the rest), and the new offset.
// A nil b stays nil; an empty one gives an empty, non-nil copy.
func put(buf []byte, off int, b []byte) ([]byte, int) {
	if b == nil {
		return nil, off
	}
	end := off + len(b)
	v := buf[off:end:end]
	copy(v, b)
	return v, end
}

// putBytea decodes a bytea's hex text to buf[off:] like put.
func putBytea(buf []byte, off int, b []byte) ([]byte, int, error) {
	end := off + hex.DecodedLen(len(b)-2)
	v := buf[off:end:end]
	if _, err := hex.Decode(v, b[2:]); err != nil {
		return nil, off, fmt.Errorf("bytea value: %w", err)
	}
	return v, end, nil
}

var errByteaFormat = errors.New("bytea value is not in hex format (bytea_output = 'hex' is required)")

func isHexBytea(b []byte) bool { return len(b) >= 2 && b[0] == '\\' && b[1] == 'x' }

// decodedLen is the bytes a text or NULL column takes once copied.
func decodedLen(c pgoutput.TupleCol, bytea bool) int {
	if c.Kind != pgoutput.KindText {
		return 0
	}
	if bytea {
		return hex.DecodedLen(len(c.Data) - 2)
	}
	return len(c.Data)
}

// topic renders the template for a row, caching the result per value.
func (d *Decoder) topic(rel *relation, cols []pgoutput.TupleCol) (string, error) {
	buf := d.buf[:0]
	ci := 0
	for _, p := range rel.topicParts {
		if p.column == "" {
			buf = append(buf, p.lit...)
			continue
		}
		c := cols[rel.topicCols[ci]]
		ci++
		if c.Kind != pgoutput.KindText {
			return "", fmt.Errorf("%w: topic column %q is %s", ErrInvalidTopic, p.column, kindName(c.Kind))
		}
		buf = append(buf, c.Data...)
	}
	d.buf = buf
	if t, ok := rel.topics[string(buf)]; ok { // no allocation for the lookup
		return t, nil
	}
	if err, ok := rel.topicErrs[string(buf)]; ok {
		return "", err
	}
	name := string(buf)
	if d.re != nil {
		name = string(d.re.AppendTopic(nil, buf))
	}
	if err := ValidTopic(name); err != nil {
		err = fmt.Errorf("%w: template %q gives %w", ErrInvalidTopic, d.template.String(), err)
		if len(rel.topicErrs) < 1024 {
			rel.topicErrs[name] = err
		}
		return "", err
	}
	if len(rel.topics) < 65536 {
		rel.topics[name] = name
	}
	return name, nil
}

func kindName(k byte) string {
	switch k {
	case pgoutput.KindNull:
		return "NULL"
	case pgoutput.KindUnchanged:
		return "an unchanged TOAST value (not sent)"
	case pgoutput.KindBinary:
		return "in binary format"
	}
	return "text"
}

// poisonEvent is the event of a row that cannot become a record: the row
// (without column drop, if drop >= 0) and the id and key read so far, copied
// out of the message. N.B. the id and key get an allocation of their own:
// the dead-letter record keeps them, and they must not keep the row alive.
func poisonEvent(rel *relation, cols []pgoutput.TupleCol, id, key []byte, err error, drop int) Event {
	ev := Event{Table: rel.qualified, Err: err, Reason: Reason(err)}
	buf := grow(len(id) + len(key))
	off := 0
	ev.ID, off = put(buf, off, id)
	ev.Key, off = put(buf, off, key)
	giveRest(buf, off, &ev.ID, &ev.Key)

	n := 0
	for i, c := range cols {
		if i != drop {
			n += len(c.Data)
		}
	}
	rowBuf := grow(n)
	off = 0
	ev.Row = make([]Field, 0, len(cols))
	var last *[]byte
	for i, c := range cols {
		if i == drop {
			continue
		}
		f := Field{Null: c.Kind == pgoutput.KindNull}
		if i < len(rel.columns) {
			f.Name, f.Type = rel.columns[i].Name, rel.columns[i].TypeOID
		}
		f.Value, off = put(rowBuf, off, c.Data)
		ev.Row = append(ev.Row, f)
		if f.Value != nil {
			last = &ev.Row[len(ev.Row)-1].Value
		}
	}
	giveRest(rowBuf, off, last)
	return ev
}

// giveRest extends the capacity of the last non-nil slice of pieces, which
// ends at off in buf, to the end of buf: the allocator's slack is counted
// with it.
func giveRest(buf []byte, off int, pieces ...*[]byte) {
	for i := len(pieces) - 1; i >= 0; i-- {
		if p := pieces[i]; p != nil && *p != nil {
			*p = buf[off-len(*p) : off : cap(buf)]
			return
		}
	}
}
