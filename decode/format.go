package decode

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// Record formats: the bytes Kafka Connect's converters write for the
// Outbox Event Router's key and value (Debezium 3.6.1 on Kafka Connect
// 4.3.1, checked byte for byte by `make compat`).
const (
	// FormatString is Connect's StringConverter: the column's text as
	// PostgreSQL renders it (a bytea's bytes). The default.
	FormatString = "string"
	// FormatJSON is JsonConverter with schemas.enable=false: a text, json or
	// jsonb column becomes a JSON string literal, an integer a JSON number,
	// a bytea a base64 string, NULL the four bytes null.
	FormatJSON = "json"
	// FormatJSONSchema is JsonConverter with schemas.enable=true: the JSON
	// of FormatJSON inside {"schema":...,"payload":...}, the schema the one
	// Debezium gives the column (io.debezium.data.Json for json and jsonb,
	// io.debezium.data.Uuid for uuid).
	FormatJSONSchema = "json-schema"
	// FormatBytes is ByteArrayConverter (or Debezium's
	// BinaryDataConverter): a bytea column's bytes. Only a bytea column
	// has this format.
	FormatBytes = "bytes"
)

var formats = []string{FormatString, FormatJSON, FormatJSONSchema, FormatBytes}

func validFormat(f string) bool {
	for _, x := range formats {
		if f == x {
			return true
		}
	}
	return false
}

// EnvelopeField puts column Column into the value as field Alias (the
// router's table.fields.additional.placement=column:envelope:alias).
type EnvelopeField struct {
	Column string
	Alias  string
}

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
	return appendJSONString(dst, text), tmp, nil
}

const hexDigits = "0123456789ABCDEF"

// appendJSONString appends s as a JSON string literal the way Jackson (the
// JSON library of Kafka's JsonConverter) writes one: '"' and '\' escaped,
// the control characters below 0x20 as \b \t \n \f \r or \u00XX
// (upper-case hex), a code point above U+FFFF as its surrogate pair
// \uXXXX\uXXXX, everything else as it is (UTF-8 kept, '/' and U+2028 not
// escaped).
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0xF0 {
			continue
		}
		dst = append(dst, s[start:i]...)
		if c >= 0xF0 {
			// N.B. a code point above U+FFFF (a 4-byte UTF-8 sequence):
			// Jackson writes its UTF-16 surrogate pair as two \uXXXX
			// escapes, seen in `make compat` (🎉 is \uD83C\uDF89).
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size <= 1 {
				dst = append(dst, c) // not UTF-8: PostgreSQL never sends it
				start = i + 1
				continue
			}
			r1, r2 := utf16.EncodeRune(r)
			dst = appendU(appendU(dst, r1), r2)
			i += size - 1
			start = i + 1
			continue
		}
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendU appends the escape \uXXXX of UTF-16 unit r, upper-case hex.
func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// javaBlank reports whether Java's String.trim() of s is empty: every
// byte is at most U+0020 (the router's route.tombstone.on.empty.payload
// test, payload.toString().trim().isEmpty()).
func javaBlank(s []byte) bool {
	for _, c := range s {
		if c > ' ' {
			return false
		}
	}
	return true
}

// topicRegex is Kafka Connect's RegexRouter as the router configures it
// (route.topic.regex, route.topic.replacement): when the regular
// expression matches the whole routing value, the topic is the
// replacement with its group references filled in; otherwise the topic is
// the routing value itself.
type topicRegex struct {
	re    *regexp.Regexp
	parts []replPart
}

// replPart is a literal or a group reference of a replacement.
type replPart struct {
	lit   string
	group int // >= 0: a group reference
}

// compileTopicRegex compiles a Java regular expression (Go's RE2 syntax
// takes the common ones; look-arounds and back references are refused)
// and a Java replacement string: $n and ${name} refer to groups, \x is a
// literal x.
func compileTopicRegex(expr, repl string) (*topicRegex, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("topic regex %q: %w (walrelay takes the regular expressions Go's regexp package does: no look-arounds or back references)", expr, err)
	}
	t := &topicRegex{re: re}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	groups := re.NumSubexp()
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '\\':
			i++
			if i >= len(repl) {
				return nil, fmt.Errorf("topic replacement %q: character to be escaped is missing", repl)
			}
			lit.WriteByte(repl[i])
		case c != '$':
			lit.WriteByte(c)
		case i+1 < len(repl) && repl[i+1] == '{':
			end := strings.IndexByte(repl[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("topic replacement %q: named group is missing its '}'", repl)
			}
			name := repl[i+2 : i+2+end]
			g := re.SubexpIndex(name)
			if g < 0 {
				return nil, fmt.Errorf("topic replacement %q: no group named %q in topic regex %q", repl, name, expr)
			}
			flush()
			t.parts = append(t.parts, replPart{group: g})
			i += 2 + end
		case i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9':
			// N.B. Java's rule: the first digit is the group; more digits
			// are taken while the number stays a group of the pattern.
			i++
			g := int(repl[i] - '0')
			if g > groups {
				return nil, fmt.Errorf("topic replacement %q: no group %d in topic regex %q", repl, g, expr)
			}
			for i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9' {
				n := g*10 + int(repl[i+1]-'0')
				if n > groups {
					break
				}
				g = n
				i++
			}
			flush()
			t.parts = append(t.parts, replPart{group: g})
		default:
			return nil, fmt.Errorf("topic replacement %q: illegal group reference at offset %d (write \\$ for a literal $)", repl, i)
		}
	}
	flush()
	return t, nil
}

// appendTopic appends the topic for routing value v. It allocates (the
// regexp's match indexes); the decoder caches each value's topic.
func (t *topicRegex) appendTopic(dst, v []byte) []byte {
	m := t.re.FindSubmatchIndex(v)
	if m == nil {
		return append(dst, v...)
	}
	for _, p := range t.parts {
		if p.group < 0 {
			dst = append(dst, p.lit...)
			continue
		}
		if s, e := m[2*p.group], m[2*p.group+1]; s >= 0 {
			dst = append(dst, v[s:e]...)
		}
	}
	return dst
}

// mapFormats prepares what the json formats write around the key and the
// payload of relation rel, and checks that the formats take the columns'
// types.
func (d *Decoder) mapFormats(rel *relation, cols []pgoutput.Column) error {
	nullable := func(name string) bool { return slices.Contains(d.cfg.NullableColumns, name) }
	var errs []error
	schema := func(flag string, i int) string {
		c := cols[i]
		s, ok := schemaOf(c.TypeOID, nullable(c.Name))
		if !ok {
			errs = append(errs, fmt.Errorf("%w: column %s.%s (%s) has type oid %d, which the %s/%s formats do not take",
				ErrUnsupportedType, rel.qualified, c.Name, flag, c.TypeOID, FormatJSON, FormatJSONSchema))
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
				rel.envNames = append(rel.envNames, ","+string(appendJSONString(nil, []byte(d.cfg.EnvelopeFields[i].Alias)))+":")
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
				rel.envFields += "," + withField(schema("--envelope-columns", ci), d.cfg.EnvelopeFields[i].Alias)
				rel.envNames = append(rel.envNames, ","+string(appendJSONString(nil, []byte(d.cfg.EnvelopeFields[i].Alias)))+":")
				rel.envKinds = append(rel.envKinds, jsonKindOf(cols[ci].TypeOID))
			}
		}
	case FormatBytes:
		if payload.TypeOID != oidBytea {
			errs = append(errs, fmt.Errorf("%w: column %s.%s has type oid %d: the %s format (ByteArrayConverter) takes a bytea payload only",
				ErrUnsupportedType, rel.qualified, payload.Name, payload.TypeOID, FormatBytes))
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
	var exp expansion
	if d.cfg.ExpandJSONPayload && p.Kind == pgoutput.KindText && !rel.payloadBytea {
		// N.B. allocates per event (the parsed tree): only with the option.
		if exp, err = (inferrer{d.cfg.ExpandJSONNullAsBytes}).expandPayload(d.cfg.PayloadColumn, p.Data); err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, err)
		}
	}
	envSchema := d.cfg.ValueFormat == FormatJSONSchema && len(rel.envIdx) > 0
	switch {
	case !exp.done:
		if envSchema {
			b = d.appendEnvelopeSchema(b, rel, cols, rel.payloadSchema)
		}
		b = append(b, rel.valPre...)
		if b, d.tmp, err = appendJSONValue(b, rel.payloadKind, p.Kind == pgoutput.KindNull, p.Data, d.tmp); err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrBadValue, d.cfg.PayloadColumn, err)
		}
	case exp.schema == nil && len(rel.envIdx) > 0:
		// N.B. the envelope's schema cannot take the payload's null
		// schema: Debezium's task fails (SchemaBuilderException).
		return nil, fmt.Errorf("%w: column %q is [], which has no schema once expanded, and Debezium's router fails its task building the envelope of it", ErrBadValue, d.cfg.PayloadColumn)
	case envSchema:
		b = d.appendEnvelopeSchema(b, rel, cols, string(appendSchema(nil, exp.schema, "", false)))
		b = append(b, rel.valPre...)
		b = append(b, exp.data...)
	case d.cfg.ValueFormat == FormatJSONSchema && exp.schema == nil:
		b = append(b, `{"schema":null,"payload":`...)
		b = appendJSONString(b, p.Data)
	case d.cfg.ValueFormat == FormatJSONSchema:
		b = append(b, `{"schema":`...)
		b = appendSchema(b, exp.schema, "", false)
		b = append(b, `,"payload":`...)
		b = append(b, exp.data...)
	case exp.schema == nil:
		b = append(b, rel.valPre...)
		b = appendJSONString(b, p.Data)
	default:
		b = append(b, rel.valPre...)
		b = append(b, exp.data...)
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

// CheckFormatType returns an error wrapping ErrUnsupportedType when the
// record formats of c cannot take a column of type oid as the column flag
// names (a bytes value needs a bytea payload): the check at start, with
// CheckColumnType; the decoder makes the same check per relation.
func (c Config) CheckFormatType(flag string, oid uint32) error {
	c = c.withDefaults()
	if flag == "--payload-column" && c.ValueFormat == FormatBytes && oid != oidBytea {
		return fmt.Errorf("%w: --value-converter %s (ByteArrayConverter) takes a bytea payload only; use string or json for this payload, or make it bytea", ErrUnsupportedType, FormatBytes)
	}
	return nil
}

// ErrNullability is wrapped when a column's NOT NULL and
// Config.NullableColumns disagree where a json-schema format writes it.
var ErrNullability = errors.New("nullability differs from the catalog")

// CheckNullable returns an error wrapping ErrNullability when the
// json-schema format would write column's "optional" (from
// NullableColumns) other than Debezium does (from the catalog: notNull),
// for the key and the payload column (flag --key-column or
// --payload-column).
func (c Config) CheckNullable(column, flag string, notNull bool) error {
	c = c.withDefaults()
	if !(flag == "--key-column" && c.KeyFormat == FormatJSONSchema || (flag == "--payload-column" || flag == "--envelope-columns") && c.ValueFormat == FormatJSONSchema) {
		return nil
	}
	listed := slices.Contains(c.NullableColumns, column)
	switch {
	case listed && notNull:
		return fmt.Errorf("%w: it is NOT NULL, but --nullable-columns names it, so json-schema would write \"optional\":true where Debezium writes false: take %s out of --nullable-columns", ErrNullability, column)
	case !listed && !notNull:
		return fmt.Errorf("%w: it may be NULL (no NOT NULL), but --nullable-columns does not name it, so json-schema would write \"optional\":false where Debezium writes true: add %s to --nullable-columns", ErrNullability, column)
	}
	return nil
}

// MappedColumns returns each column the configuration names, with the
// flag that names it.
func MappedColumns(c Config) (map[string]string, error) {
	c = c.withDefaults()
	want := map[string]string{c.IDColumn: "--id-column", c.KeyColumn: "--key-column", c.PayloadColumn: "--payload-column"}
	for _, h := range c.HeaderColumns {
		want[h.Column] = "--header-columns"
	}
	for _, f := range c.EnvelopeFields {
		want[f.Column] = "--envelope-columns"
	}
	if c.PartitionColumn != "" {
		want[c.PartitionColumn] = "--partition-column"
	}
	if c.TimestampColumn != "" {
		want[c.TimestampColumn] = "--timestamp-column"
	}
	if len(c.EnvelopeFields) > 0 && c.ValueFormat == FormatJSONSchema {
		want[c.RouteColumn] = "--route-column"
	}
	if len(c.EnvelopeFields) > 0 && c.SchemaVersionColumn != "" {
		want[c.SchemaVersionColumn] = "--schema-version-column"
	}
	if c.TopicRegex != "" {
		want[c.RouteColumn] = "--route-column"
		return want, nil
	}
	tmpl, err := ParseTemplate(c.Topic)
	if err != nil {
		return nil, err
	}
	for _, col := range tmpl.Columns() {
		want[col] = "--topic"
	}
	return want, nil
}

// withField is a field's schema in a struct: schema s with "field":name
// last (JsonConverter.asJsonSchema puts it after the field's own keys).
func withField(s, name string) string {
	if s == "" {
		return ""
	}
	return s[:len(s)-1] + `,"field":` + string(appendJSONString(nil, []byte(name))) + "}"
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
		s = `{"type":"struct","fields":[` + withField(payloadSchema, "payload") + rel.envFields + `],"optional":false,"name":` + string(appendJSONString(nil, []byte(name)))
		if version != "null" {
			s += `,"version":` + version
		}
		s += "}"
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

// ErrDefault is wrapped when a column json-schema writes has a constant
// default: Debezium writes it into the column's schema ("default"),
// walrelay does not.
var ErrDefault = errors.New("constant column default")

// CheckDefault returns an error wrapping ErrDefault when the json-schema
// format writes the column flag names (key, payload, envelope field) and
// its default expr is a constant (no function call: 'x'::text, 0), which
// Debezium shows as the schema's "default". A function's default
// (gen_random_uuid(), now()) Debezium does not evaluate: no default.
func (c Config) CheckDefault(flag, expr string) error {
	c = c.withDefaults()
	if !(flag == "--key-column" && c.KeyFormat == FormatJSONSchema || (flag == "--payload-column" || flag == "--envelope-columns") && c.ValueFormat == FormatJSONSchema) {
		return nil
	}
	if expr == "" || strings.Contains(expr, "(") {
		return nil
	}
	return fmt.Errorf("%w: it has DEFAULT %s, which Debezium writes into the column's json-schema schema as \"default\" and walrelay does not", ErrDefault, expr)
}
