package decode

import (
	"errors"
	"fmt"
	"slices"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// The outbox column mapping: which columns the configuration names, by
// which flag, and what each is to the record. One list serves both the
// decoder (mapOutbox, per relation) and the check at start
// (MappedColumns), so that the two never disagree on a column.

// role is what a mapped column is to the record.
type role uint8

const (
	roleID role = iota
	roleKey
	rolePayload
	roleHeader    // one per Config.HeaderColumns entry, in order
	roleTopic     // one per column of the topic template (the route column with TopicRegex)
	roleEnvelope  // one per Config.EnvelopeFields entry, in order
	rolePartition // Config.PartitionColumn: the record's Kafka partition
	roleTimestamp // Config.TimestampColumn
	roleRoute     // the json-schema envelope's struct name
	roleVersion   // the json-schema envelope's version
)

// mappedColumn is one column the configuration names, with the flag that
// names it.
type mappedColumn struct {
	column, flag string
	role         role
}

// topicTemplate is the template whose columns route a record: Topic, or
// the route column alone with TopicRegex (Topic is then a replacement).
func (c Config) topicTemplate() (Template, error) {
	if c.TopicRegex != "" {
		return Template{src: c.Topic, parts: []templatePart{{column: c.RouteColumn}}}, nil
	}
	return ParseTemplate(c.Topic)
}

// mappedColumns lists the columns c (with its defaults) names, in the
// order the decoder maps them (the order of a relation's errors), topic
// being c.topicTemplate().
func (c Config) mappedColumns(topic Template) []mappedColumn {
	cols := []mappedColumn{
		{c.IDColumn, "--id-column", roleID},
		{c.KeyColumn, "--key-column", roleKey},
		{c.PayloadColumn, "--payload-column", rolePayload},
	}
	for _, h := range c.HeaderColumns {
		cols = append(cols, mappedColumn{h.Column, "--header-columns", roleHeader})
	}
	topicFlag := "--topic"
	if c.TopicRegex != "" {
		topicFlag = "--route-column"
	}
	for _, col := range topic.Columns() {
		cols = append(cols, mappedColumn{col, topicFlag, roleTopic})
	}
	for _, f := range c.EnvelopeFields {
		cols = append(cols, mappedColumn{f.Column, "--envelope-columns", roleEnvelope})
	}
	if c.PartitionColumn != "" {
		cols = append(cols, mappedColumn{c.PartitionColumn, "--partition-column", rolePartition})
	}
	if c.TimestampColumn != "" {
		cols = append(cols, mappedColumn{c.TimestampColumn, "--timestamp-column", roleTimestamp})
	}
	if len(c.EnvelopeFields) > 0 && c.ValueFormat == FormatJSONSchema {
		cols = append(cols, mappedColumn{c.RouteColumn, "--route-column", roleRoute})
	}
	if len(c.EnvelopeFields) > 0 && c.SchemaVersionColumn != "" {
		// N.B. the check at start wants it with either json format; the
		// decoder reads it with json-schema only (mapOutbox).
		cols = append(cols, mappedColumn{c.SchemaVersionColumn, "--schema-version-column", roleVersion})
	}
	return cols
}

// MappedColumns returns each column the configuration names, with the
// flag that names it.
func MappedColumns(c Config) (map[string]string, error) {
	c = c.withDefaults()
	topic, err := c.topicTemplate()
	if err != nil {
		return nil, err
	}
	cols := c.mappedColumns(topic)
	want := make(map[string]string, len(cols))
	// N.B. the topic's columns last: a column named by another flag as
	// well is checked as the topic's (whose flag takes any type).
	for _, m := range cols {
		if m.role != roleTopic {
			want[m.column] = m.flag
		}
	}
	for _, m := range cols {
		if m.role == roleTopic {
			want[m.column] = m.flag
		}
	}
	return want, nil
}

// mapOutbox maps the columns of outbox rel, described by m, each type
// resolved through Config.Types.
func (d *Decoder) mapOutbox(rel *relation, m pgoutput.Relation) *relation {
	if cols, ok := d.cfg.Types.resolveColumns(m.Columns); ok {
		rel.sent = m.Columns
		m.Columns, rel.columns = cols, cols
	}
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
			rel.problems = append(rel.problems, mappingProblem{column: name, flag: flag})
			return -1
		}
		if err := CheckColumnType(flag, m.Columns[i].TypeOID); err != nil {
			errs = append(errs, fmt.Errorf("column %s.%s has type %s: %w", rel.qualified, name, d.typeLabel(rel.sentType(i)), err))
			rel.problems = append(rel.problems, mappingProblem{column: name, flag: flag, typed: true, oid: rel.sentType(i)})
			return -1
		}
		return i
	}
	rel.topicParts = d.template.parts
	for _, c := range d.mapped {
		if c.role == roleVersion && d.cfg.ValueFormat != FormatJSONSchema {
			continue
		}
		i := need(c.column, c.flag)
		switch c.role {
		case roleID:
			rel.idIdx = i
		case roleKey:
			rel.keyIdx = i
		case rolePayload:
			rel.payloadIdx = i
		case roleHeader:
			rel.headerIdx = append(rel.headerIdx, i)
		case roleTopic:
			rel.topicCols = append(rel.topicCols, i)
		case roleEnvelope:
			rel.envIdx = append(rel.envIdx, i)
		case rolePartition:
			rel.partIdx = i
		case roleTimestamp:
			rel.stampIdx = i
		case roleRoute:
			rel.routeIdx = i
		case roleVersion:
			rel.versionIdx = i
		}
	}
	rel.traceIdx = d.traceIndex(m.Columns)
	if rel.payloadIdx >= 0 {
		rel.payloadBytea = m.Columns[rel.payloadIdx].TypeOID == oidBytea
	}
	if rel.idIdx >= 0 && rel.keyIdx >= 0 && rel.payloadIdx >= 0 && !slices.Contains(rel.envIdx, -1) {
		if err := d.mapFormats(rel, m.Columns); err != nil {
			errs = append(errs, err)
		}
	}
	rel.topics = make(map[string]string)
	rel.topicErrs = make(map[string]error)
	// N.B. not logged here: Decode returns it (ErrSchemaChanged), and the
	// pipeline logs it once as it stops.
	rel.err = errors.Join(errs...)
	return rel
}
