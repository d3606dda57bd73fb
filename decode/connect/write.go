package connect

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// errConverter is a value that does not fit its schema: JsonConverter
// fails Debezium's task on it.
var errConverter = errors.New("the expanded payload does not fit the schema Debezium infers from it, and Debezium's JsonConverter fails its task on such a record")

// appendData appends the JSON JsonConverter writes for n as a value of
// schema s (Struct, List, boxed primitives, as JsonSchemaData builds them).
func appendData(dst []byte, s *Schema, n *jnode) ([]byte, error) {
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
			dst = AppendJSONString(dst, []byte(f.name))
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
		return AppendJSONString(dst, []byte(n.str)), nil
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

// AppendSchema appends s, an inferred schema, as JsonConverter writes it.
func AppendSchema(dst []byte, s *Schema) []byte { return appendSchema(dst, s, "", false) }

// appendSchema appends s as JsonConverter.asJsonSchema writes it (type,
// items or fields, optional, name), with "field":name last inside a
// struct's fields.
func appendSchema(dst []byte, s *Schema, field string, inStruct bool) []byte {
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
		dst = AppendJSONString(dst, []byte(s.name))
	}
	if inStruct {
		dst = append(dst, `,"field":`...)
		dst = AppendJSONString(dst, []byte(field))
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
