package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// The router's table.expand.json.payload=true (Debezium 3.6.1
// EventRouterDelegate with JsonSchemaData): a payload whose text starts
// with '{' or '[' is parsed (Jackson, trailing text ignored) and becomes
// a Connect value of a schema inferred from the JSON, which JsonConverter
// then writes. A payload that does not parse, or whose arrays the
// inference refuses (mixed types, numbers of two kinds, only nulls), is
// left as it is. One whose schema is inferred but whose value does not
// fit it (a top-level array, an integer beyond 64 bits, a field whose
// type differs between the objects of an array) fails Debezium's task in
// the converter: here a poison event (ErrBadValue). A top-level [] has no
// schema: the payload stays a string, with a null schema.

// jnode is a parsed JSON value, object members in their order (a repeated
// member keeps its first place and takes its last value, as Jackson's
// ObjectNode).
type jnode struct {
	kind   jkind
	str    string  // jString; a number's literal
	num    float64 // jDouble
	ival   int64   // jInt, jLong
	b      bool
	keys   []string
	vals   []*jnode // object values, array elements
	bigint bool     // an integer literal beyond int64
}

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jString
	jInt    // fits int32 (Jackson's IntNode)
	jLong   // fits int64 (LongNode)
	jBig    // beyond int64 (BigIntegerNode)
	jDouble // a literal with a fraction or exponent (DoubleNode)
	jArray
	jObject
)

func (n *jnode) isNumber() bool { return n.kind >= jInt && n.kind <= jDouble }

// parseJSON reads the first JSON value of b, as Jackson's readTree (the
// rest of b is not read).
func parseJSON(b []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return readNode(dec)
}

func readNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	return nodeOf(dec, tok)
}

func nodeOf(dec *json.Decoder, tok json.Token) (*jnode, error) {
	switch t := tok.(type) {
	case nil:
		return &jnode{kind: jNull}, nil
	case bool:
		return &jnode{kind: jBool, b: t}, nil
	case string:
		return &jnode{kind: jString, str: t}, nil
	case json.Number:
		return numberNode(string(t))
	case json.Delim:
		switch t {
		case '[':
			n := &jnode{kind: jArray}
			for dec.More() {
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token()
			return n, err
		case '{':
			n := &jnode{kind: jObject}
			at := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				if i, ok := at[k]; ok {
					n.vals[i] = v
					continue
				}
				at[k] = len(n.keys)
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token()
			return n, err
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// numberNode classifies a number literal as Jackson does: an integer
// literal is an int, a long or a big integer by its size; anything with
// a fraction or an exponent is a double.
func numberNode(lit string) (*jnode, error) {
	if !strings.ContainsAny(lit, ".eE") {
		i, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			if _, ok := new(big.Int).SetString(lit, 10); !ok {
				return nil, fmt.Errorf("number %q", lit)
			}
			return &jnode{kind: jBig, str: lit}, nil
		}
		if i >= math.MinInt32 && i <= math.MaxInt32 {
			return &jnode{kind: jInt, ival: i}, nil
		}
		return &jnode{kind: jLong, ival: i}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, err
	}
	return &jnode{kind: jDouble, num: f, str: lit}, nil
}

// cschema is a Connect schema as JsonSchemaData infers it.
type cschema struct {
	typ      string // as JsonConverter names it: "string", "boolean", "int32", "int64", "double", "bytes", "array", "struct"
	optional bool
	name     string
	hasName  bool
	items    *cschema
	fields   []cfield
}

type cfield struct {
	name   string
	schema *cschema
}

var (
	schString  = &cschema{typ: "string", optional: true}
	schBool    = &cschema{typ: "boolean", optional: true}
	schInt32   = &cschema{typ: "int32", optional: true}
	schInt64   = &cschema{typ: "int64", optional: true}
	schFloat64 = &cschema{typ: "double", optional: true} // N.B. JsonConverter's name for FLOAT64
	schBytes   = &cschema{typ: "bytes", optional: true}
)

func (s *cschema) field(name string) *cschema {
	for _, f := range s.fields {
		if f.name == name {
			return f.schema
		}
	}
	return nil
}

// equal is ConnectSchema.equals for the schemas inferred here.
func (s *cschema) equal(o *cschema) bool {
	if s == o {
		return true
	}
	if s == nil || o == nil || s.typ != o.typ || s.optional != o.optional || s.hasName != o.hasName || s.name != o.name || len(s.fields) != len(o.fields) {
		return false
	}
	if (s.items == nil) != (o.items == nil) || s.items != nil && !s.items.equal(o.items) {
		return false
	}
	for i := range s.fields {
		if s.fields[i].name != o.fields[i].name || !s.fields[i].schema.equal(o.fields[i].schema) {
			return false
		}
	}
	return true
}

// errExpandRefused is JsonSchemaData refusing an array: the payload is
// left as it is.
var errExpandRefused = errors.New("array refused by the schema inference")

// inferrer is JsonSchemaData.toConnectSchema with its null behaviour.
type inferrer struct{ nullBytes bool }

// schemaOf returns n's schema, nil for none (null, an empty array).
// key is the struct name path; hasKey false is Java's null key.
func (in inferrer) schemaOf(key string, hasKey bool, n *jnode) (*cschema, error) {
	switch n.kind {
	case jString:
		return schString, nil
	case jBool:
		return schBool, nil
	case jInt:
		return schInt32, nil
	case jLong:
		return schInt64, nil
	case jBig, jDouble:
		return schFloat64, nil
	case jArray:
		if len(n.vals) == 0 {
			return nil, nil
		}
		items, err := in.arrayItems(key, hasKey, n)
		if err != nil {
			return nil, err
		}
		return &cschema{typ: "array", optional: true, items: items}, nil
	case jObject:
		s := &cschema{typ: "struct", optional: true, name: key, hasName: hasKey}
		for i, k := range n.keys {
			fk := k
			if hasKey && strings.TrimSpace(key) != "" {
				fk = key + "." + k
			}
			fs, err := in.schemaOf(fk, true, n.vals[i])
			if err != nil {
				return nil, err
			}
			if fs != nil && s.field(k) == nil {
				s.fields = append(s.fields, cfield{k, fs})
			}
		}
		return s, nil
	case jNull:
		if in.nullBytes {
			return schBytes, nil
		}
	}
	return nil, nil
}

// arrayItems is toConnectSchemaWithCycles.
func (in inferrer) arrayItems(key string, hasKey bool, arr *jnode) (*cschema, error) {
	var ref *jnode
	var refSchema *cschema
	for _, e := range arr.vals {
		if e.kind == jNull {
			continue
		}
		if ref == nil {
			ref = e
		}
		if nodeType(e) != nodeType(ref) {
			return nil, errExpandRefused
		}
		if ref.isNumber() {
			if refSchema == nil {
				refSchema, _ = in.schemaOf("", false, ref)
			}
			if es, _ := in.schemaOf("", false, e); es != refSchema {
				return nil, errExpandRefused
			}
		}
	}
	if ref == nil {
		ref = &jnode{kind: jNull}
	}
	if ref.kind == jObject {
		// N.B. Debezium merges the distinct element schemas of a
		// HashSet, whose order is not stable between JVM runs; here
		// they merge in the order they first appear.
		var distinct []*cschema
		for _, e := range arr.vals {
			if e.kind != jObject {
				continue
			}
			s, err := in.schemaOf(key, hasKey, e)
			if err != nil {
				return nil, err
			}
			dup := false
			for _, d := range distinct {
				dup = dup || d.equal(s)
			}
			if !dup {
				distinct = append(distinct, s)
			}
		}
		var merged *cschema
		for _, s := range distinct {
			merged = mergeSchema(merged, s)
		}
		return merged, nil
	}
	s, err := in.schemaOf("", false, ref)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errExpandRefused
	}
	return s, nil
}

// nodeType is Jackson's JsonNodeType: all numbers are NUMBER.
func nodeType(n *jnode) jkind {
	if n.isNumber() {
		return jInt
	}
	return n.kind
}

// mergeSchema is JsonSchemaData.mergeSchema: left's fields, then right's
// new ones; a bytes field gives way to another type. N.B. the result is
// built by SchemaUtil.copySchemaBasics, which does not copy optional:
// a merged struct is required.
func mergeSchema(left, right *cschema) *cschema {
	if left == nil {
		return right
	}
	out := &cschema{typ: left.typ, name: left.name, hasName: left.hasName, fields: append([]cfield(nil), left.fields...)}
	for _, f := range right.fields {
		i := -1
		for j := range out.fields {
			if out.fields[j].name == f.name {
				i = j
			}
		}
		switch {
		case i < 0:
			out.fields = append(out.fields, f)
		case !out.fields[i].schema.equal(f.schema) && out.fields[i].schema.typ == "bytes" && f.schema.typ != "bytes":
			out.fields[i].schema = f.schema
		}
	}
	return out
}

// errConverter is a value that does not fit its schema: JsonConverter
// fails Debezium's task on it.
var errConverter = errors.New("the expanded payload does not fit the schema Debezium infers from it, and Debezium's JsonConverter fails its task on such a record")

// appendData appends the JSON JsonConverter writes for n as a value of
// schema s (Struct, List, boxed primitives, as JsonSchemaData builds them).
func appendData(dst []byte, s *cschema, n *jnode) ([]byte, error) {
	if n == nil || n.kind == jNull {
		if s != nil && !s.optional {
			return dst, errConverter
		}
		return append(dst, "null"...), nil
	}
	switch s.typ {
	case "struct":
		if n.kind != jObject {
			return dst, errConverter
		}
		dst = append(dst, '{')
		for i, f := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, []byte(f.name))
			dst = append(dst, ':')
			var v *jnode
			for j, k := range n.keys {
				if k == f.name {
					v = n.vals[j]
				}
			}
			var err error
			if dst, err = appendData(dst, f.schema, v); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case "array":
		if n.kind != jArray {
			return dst, errConverter
		}
		dst = append(dst, '[')
		for i, e := range n.vals {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendData(dst, s.items, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case "string":
		if n.kind != jString {
			return dst, errConverter
		}
		return appendJSONString(dst, []byte(n.str)), nil
	case "boolean":
		if n.kind != jBool {
			return dst, errConverter
		}
		return strconv.AppendBool(dst, n.b), nil
	case "int32":
		if n.kind != jInt {
			return dst, errConverter
		}
		return strconv.AppendInt(dst, n.ival, 10), nil
	case "int64":
		if n.kind != jLong && n.kind != jInt {
			return dst, errConverter
		}
		if n.kind == jInt {
			// N.B. an Integer in an INT64 field: Struct.put refuses it.
			return dst, errConverter
		}
		return strconv.AppendInt(dst, n.ival, 10), nil
	case "double":
		// N.B. JsonSchemaData gives a big integer a BigDecimal, which an
		// INT64/FLOAT64 field refuses; an int in a float64 field too.
		if n.kind != jDouble {
			return dst, errConverter
		}
		if math.IsInf(n.num, 0) || math.IsNaN(n.num) {
			return dst, fmt.Errorf("%w (a number beyond the range of a double)", errConverter)
		}
		return appendJavaDouble(dst, n.num), nil
	case "bytes":
		// Only nulls have the bytes schema (table.json.payload.null.behavior=optional_bytes).
		return dst, errConverter
	}
	return dst, errConverter
}

// appendSchema appends s as JsonConverter.asJsonSchema writes it (type,
// items or fields, optional, name), with "field":name last inside a
// struct's fields.
func appendSchema(dst []byte, s *cschema, field string, inStruct bool) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, s.typ...)
	dst = append(dst, '"')
	switch s.typ {
	case "array":
		dst = append(dst, `,"items":`...)
		dst = appendSchema(dst, s.items, "", false)
	case "struct":
		dst = append(dst, `,"fields":[`...)
		for i, f := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendSchema(dst, f.schema, f.name, true)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"optional":`...)
	dst = strconv.AppendBool(dst, s.optional)
	if s.hasName {
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, []byte(s.name))
	}
	if inStruct {
		dst = append(dst, `,"field":`...)
		dst = appendJSONString(dst, []byte(field))
	}
	return append(dst, '}')
}

// appendJavaDouble appends f as Java's Double.toString writes it, with
// the shortest digits that read back as f: plain from 10^-3 up to 10^7
// ("100.0", "0.001"), otherwise computerized scientific ("1.0E7",
// "1.0E-4"). N.B. Java 19 and later give the shortest digits; Java 17's
// Double.toString gives more for a few values (JDK-4511638).
func appendJavaDouble(dst []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.dddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	digits := strings.Replace(mant, ".", "", 1)
	if f >= 1e-3 && f < 1e7 {
		if exp >= 0 {
			intLen := exp + 1
			for len(digits) < intLen {
				digits += "0"
			}
			dst = append(dst, digits[:intLen]...)
			dst = append(dst, '.')
			if frac := digits[intLen:]; frac != "" {
				return append(dst, frac...)
			}
			return append(dst, '0')
		}
		dst = append(dst, "0."...)
		for i := 0; i < -exp-1; i++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[0], '.')
	if len(digits) > 1 {
		dst = append(dst, digits[1:]...)
	} else {
		dst = append(dst, '0')
	}
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(exp), 10)
}

// expansion is what expanding one payload gave.
type expansion struct {
	done   bool     // expanded: schema and data hold it
	schema *cschema // nil with done: no schema (a top-level [])
	data   []byte   // the JSON of the value (done and schema != nil)
}

// expandPayload expands the text of a payload, or reports it left as it
// is (done false); an error wraps errConverter.
func (in inferrer) expandPayload(payloadColumn string, text []byte) (expansion, error) {
	if len(text) == 0 || text[0] != '{' && text[0] != '[' {
		return expansion{}, nil
	}
	n, err := parseJSON(text)
	if err != nil && !errors.Is(err, io.EOF) || n == nil {
		return expansion{}, nil // N.B. Debezium logs "JSON expansion failed" and leaves it
	}
	s, err := in.schemaOf(payloadColumn, true, n)
	if err != nil {
		return expansion{}, nil
	}
	if s == nil {
		// N.B. a top-level []: the schema becomes null, the value stays
		// the string (toConnectData fails on the null schema and is
		// caught).
		return expansion{done: true}, nil
	}
	if n.kind != jObject {
		// N.B. a top-level array: toConnectData makes a Struct of it,
		// which fails and is caught, leaving the string under an array
		// schema, which the converter refuses.
		return expansion{}, fmt.Errorf("%w (a top-level JSON array)", errConverter)
	}
	data, err := appendData(nil, s, n)
	if err != nil {
		return expansion{}, err
	}
	return expansion{done: true, schema: s, data: data}, nil
}
