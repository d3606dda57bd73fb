package decode

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/walrelay/walrelay/decode/connect"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// schemaOf is the JSON schema Kafka's JsonConverter writes for a column
// Debezium maps from type oid (type, optional, name, version in this
// order: JsonConverter.asJsonSchema), or false for a type the json
// formats do not take.
func schemaOf(oid uint32, optional bool) (string, bool) {
	var s string
	opt := strconv.FormatBool(optional)
	switch oid {
	case oidText, oidVarchar, oidBpchar:
		s = `{"type":"string","optional":` + opt + `}`
	case oidJSON, oidJSONB:
		s = `{"type":"string","optional":` + opt + `,"name":"io.debezium.data.Json","version":1}`
	case oidUUID:
		s = `{"type":"string","optional":` + opt + `,"name":"io.debezium.data.Uuid","version":1}`
	case oidInt8:
		s = `{"type":"int64","optional":` + opt + `}`
	case oidInt4:
		s = `{"type":"int32","optional":` + opt + `}`
	case oidInt2:
		s = `{"type":"int16","optional":` + opt + `}`
	case oidBool:
		s = `{"type":"boolean","optional":` + opt + `}`
	case oidBytea:
		s = `{"type":"bytes","optional":` + opt + `}`
	default:
		return "", false
	}
	return s, true
}

// jsonKind is how a column of type oid is written as JSON.
type jsonKind uint8

const (
	jsonString jsonKind = iota // a JSON string of the text
	jsonNumber                 // the text as it is (PostgreSQL's integer text is a JSON number)
	jsonBool                   // t/f as true/false
	jsonBase64                 // a bytea's bytes, base64 in a JSON string
)

func jsonKindOf(oid uint32) jsonKind {
	switch oid {
	case oidInt8, oidInt4, oidInt2:
		return jsonNumber
	case oidBool:
		return jsonBool
	case oidBytea:
		return jsonBase64
	}
	return jsonString
}

// appendJSONValue appends the JSON of one column value (text form as
// PostgreSQL sent it; a bytea's hex text), or null. tmp is scratch room
// for a bytea's bytes; it is returned for reuse.
func appendJSONValue(dst []byte, kind jsonKind, null bool, text, tmp []byte) ([]byte, []byte, error) {
	if null {
		return append(dst, "null"...), tmp, nil
	}
	switch kind {
	case jsonNumber:
		return append(dst, text...), tmp, nil
	case jsonBool:
		if len(text) == 1 && text[0] == 't' {
			return append(dst, "true"...), tmp, nil
		}
		return append(dst, "false"...), tmp, nil
	case jsonBase64:
		if !isHexBytea(text) {
			return dst, tmp, errByteaFormat
		}
		n := hex.DecodedLen(len(text) - 2)
		if cap(tmp) < n {
			tmp = make([]byte, n)
		}
		tmp = tmp[:n]
		if _, err := hex.Decode(tmp, text[2:]); err != nil {
			return dst, tmp, fmt.Errorf("bytea value: %w", err)
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, tmp)
		return append(dst, '"'), tmp, nil
	}
	return connect.AppendJSONString(dst, text), tmp, nil
}

// mapFormats prepares what the json formats write around the key and the
// payload of relation rel, and checks that the formats take the columns'
// types.
func (d *Decoder) mapFormats(rel *relation, cols []pgoutput.Column) error {
	nullable := func(name string) bool { return slices.Contains(d.cfg.NullableColumns, name) }
	var errs []error
	schema := func(flag string, i int) string {
		c := cols[i]
		// N.B. an enum is Debezium's io.debezium.data.Enum; a domain
		// has its base type's schema, citext text's (typeres.go).
		if b, ok := d.cfg.Types[rel.sentType(i)]; ok && b.Enum {
			return enumSchema(b.Labels, nullable(c.Name))
		}
		s, ok := schemaOf(c.TypeOID, nullable(c.Name))
		if !ok {
			errs = append(errs, fmt.Errorf("%w: column %s.%s (%s) has type %s, which the %s/%s formats do not take",
				ErrUnsupportedType, rel.qualified, c.Name, flag, d.typeLabel(rel.sentType(i)), FormatJSON, FormatJSONSchema))
			rel.problems = append(rel.problems, mappingProblem{column: c.Name, flag: flag, typed: true, oid: rel.sentType(i), by: d.converterOf(flag)})
		}
		return s
	}
	key, payload := cols[rel.keyIdx], cols[rel.payloadIdx]
	rel.keyKind, rel.payloadKind = jsonKindOf(key.TypeOID), jsonKindOf(payload.TypeOID)
	switch d.cfg.KeyFormat {
	case FormatJSON:
		schema("--key-column", rel.keyIdx)
	case FormatJSONSchema:
		rel.keyPre, rel.keySuf = `{"schema":`+schema("--key-column", rel.keyIdx)+`,"payload":`, "}"
	}
	switch d.cfg.ValueFormat {
	case FormatJSON:
		schema("--payload-column", rel.payloadIdx)
		if len(rel.envIdx) > 0 {
			rel.valPre, rel.valSuf = `{"payload":`, "}"
			for i, ci := range rel.envIdx {
				schema("--envelope-columns", ci)
				rel.envNames = append(rel.envNames, ","+string(connect.AppendJSONString(nil, []byte(d.cfg.EnvelopeFields[i].Alias)))+":")
				rel.envKinds = append(rel.envKinds, jsonKindOf(cols[ci].TypeOID))
			}
		}
	case FormatJSONSchema:
		ps := schema("--payload-column", rel.payloadIdx)
		rel.valPre, rel.valSuf = `{"schema":`+ps+`,"payload":`, "}"
		if len(rel.envIdx) > 0 {
			// N.B. the envelope: a struct of the payload and the placed
			// columns, each field the column's schema with its alias.
			rel.payloadSchema = ps
			rel.valPre, rel.valSuf = `{"payload":`, "}}"
			for i, ci := range rel.envIdx {
				rel.envFields += "," + connect.WithField(schema("--envelope-columns", ci), d.cfg.EnvelopeFields[i].Alias)
				rel.envNames = append(rel.envNames, ","+string(connect.AppendJSONString(nil, []byte(d.cfg.EnvelopeFields[i].Alias)))+":")
				rel.envKinds = append(rel.envKinds, jsonKindOf(cols[ci].TypeOID))
			}
		}
	case FormatBytes:
		if payload.TypeOID != oidBytea {
			errs = append(errs, fmt.Errorf("%w: column %s.%s has type %s: the %s format (ByteArrayConverter) takes a bytea payload only",
				ErrUnsupportedType, rel.qualified, payload.Name, d.typeLabel(rel.sentType(rel.payloadIdx)), FormatBytes))
			rel.problems = append(rel.problems, mappingProblem{column: payload.Name, flag: "--payload-column", typed: true, oid: rel.sentType(rel.payloadIdx), by: "--value-converter " + FormatBytes})
		}
	}
	return errors.Join(errs...)
}

// encodeKey returns the key in the key format, in d.kbuf.
func (d *Decoder) encodeKey(rel *relation, key []byte) ([]byte, error) {
	b := append(d.kbuf[:0], rel.keyPre...)
	var err error
	b, d.tmp, err = appendJSONValue(b, rel.keyKind, false, key, d.tmp)
	d.kbuf = append(b, rel.keySuf...)
	return d.kbuf, err
}

// encodeValue returns the value in a json format, in d.vbuf.
func (d *Decoder) encodeValue(rel *relation, cols []pgoutput.TupleCol) ([]byte, error) {
	b := d.vbuf[:0]
	p := cols[rel.payloadIdx]
	var err error
	var exp connect.Expansion
	if d.cfg.ExpandJSONPayload && p.Kind == pgoutput.KindText && !rel.payloadBytea {
		// N.B. allocates per event (the parsed tree): only with the option.
		if exp, err = (connect.Expander{NullAsBytes: d.cfg.ExpandJSONNullAsBytes}).Expand(d.cfg.PayloadColumn, p.Data); err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, err)
		}
	}
	envSchema := d.cfg.ValueFormat == FormatJSONSchema && len(rel.envIdx) > 0
	switch {
	case !exp.Done:
		if envSchema {
			b = d.appendEnvelopeSchema(b, rel, cols, rel.payloadSchema)
		}
		b = append(b, rel.valPre...)
		if b, d.tmp, err = appendJSONValue(b, rel.payloadKind, p.Kind == pgoutput.KindNull, p.Data, d.tmp); err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, err)
		}
	case exp.Schema == nil && len(rel.envIdx) > 0:
		// N.B. the envelope's schema cannot take the payload's null
		// schema: Debezium's task fails (SchemaBuilderException).
		return nil, fmt.Errorf("%w: column %q is [], which has no schema once expanded, and Debezium's router fails its task building the envelope of it", ErrBadValue, d.cfg.PayloadColumn)
	case envSchema:
		b = d.appendEnvelopeSchema(b, rel, cols, string(connect.AppendSchema(nil, exp.Schema)))
		b = append(b, rel.valPre...)
		b = append(b, exp.Data...)
	case d.cfg.ValueFormat == FormatJSONSchema && exp.Schema == nil:
		b = append(b, `{"schema":null,"payload":`...)
		b = connect.AppendJSONString(b, p.Data)
	case d.cfg.ValueFormat == FormatJSONSchema:
		b = append(b, `{"schema":`...)
		b = connect.AppendSchema(b, exp.Schema)
		b = append(b, `,"payload":`...)
		b = append(b, exp.Data...)
	case exp.Schema == nil:
		b = append(b, rel.valPre...)
		b = connect.AppendJSONString(b, p.Data)
	default:
		b = append(b, rel.valPre...)
		b = append(b, exp.Data...)
	}
	for i, ci := range rel.envIdx {
		b = append(b, rel.envNames[i]...)
		c := cols[ci]
		if c.Kind != pgoutput.KindText && c.Kind != pgoutput.KindNull {
			return nil, fmt.Errorf("%w: column %q is %s", ErrBadValue, d.cfg.EnvelopeFields[i].Column, kindName(c.Kind))
		}
		if b, d.tmp, err = appendJSONValue(b, rel.envKinds[i], c.Kind == pgoutput.KindNull, c.Data, d.tmp); err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.EnvelopeFields[i].Column, err)
		}
	}
	d.vbuf = append(b, rel.valSuf...)
	return d.vbuf, nil
}

// maxStructs bounds the envelope struct cache as Debezium's (10000).
const maxStructs = 10000

// appendEnvelopeSchema appends {"schema":STRUCT,"payload": for a
// json-schema value with envelope fields, STRUCT the router's value
// schema: the payload's field (schema payloadSchema) and the placed
// columns', named PREFIX.SCHEMA.TABLE.ROUTE.Value, with the event's
// version when --schema-version-column is set.
//
// N.B. Debezium 3.6.1 caches the struct by the payload's schema (by the
// version with table.field.event.schema.version) and builds it from the
// first event it meets: every later event with that payload schema gets
// the first one's route value in its name, until the connector task
// restarts. walrelay does the same from its own start.
func (d *Decoder) appendEnvelopeSchema(b []byte, rel *relation, cols []pgoutput.TupleCol, payloadSchema string) []byte {
	key := "p" + payloadSchema
	version := "null"
	if rel.versionIdx >= 0 {
		if c := cols[rel.versionIdx]; c.Kind == pgoutput.KindText {
			version = string(c.Data)
		}
		key = "v" + version
	}
	s, ok := d.structs[key]
	if !ok {
		route := "null" // N.B. Java's string concatenation of a null
		if c := cols[rel.routeIdx]; c.Kind == pgoutput.KindText {
			route = string(c.Data)
		}
		name := d.cfg.SchemaNamePrefix + "." + rel.qualified + "." + route + ".Value"
		v := version
		if v == "null" {
			v = ""
		}
		s = connect.EnvelopeSchema(payloadSchema, rel.envFields, name, v)
		if d.structs == nil {
			d.structs = make(map[string]string)
		}
		if len(d.structs) < maxStructs {
			d.structs[key] = s
		}
	}
	b = append(b, `{"schema":`...)
	b = append(b, s...)
	return append(b, `,"payload":`...)
}

// converterOf names the converter flag that writes the column flag names.
func (d *Decoder) converterOf(flag string) string {
	if flag == "--key-column" {
		return "--key-converter " + d.cfg.KeyFormat
	}
	return "--value-converter " + d.cfg.ValueFormat
}
