package connect

import (
	"errors"
	"strings"
)

// Schema is a Connect schema as JsonSchemaData infers it.
type Schema struct {
	typ      string // as JsonConverter names it: "string", "boolean", "int32", "int64", "double", "bytes", "array", "struct"
	optional bool
	name     string
	hasName  bool
	items    *Schema
	fields   []cfield
}

type cfield struct {
	name   string
	schema *Schema
}

var (
	schString  = &Schema{typ: "string", optional: true}
	schBool    = &Schema{typ: "boolean", optional: true}
	schInt32   = &Schema{typ: "int32", optional: true}
	schInt64   = &Schema{typ: "int64", optional: true}
	schFloat64 = &Schema{typ: "double", optional: true} // N.B. JsonConverter's name for FLOAT64
	schBytes   = &Schema{typ: "bytes", optional: true}
)

func (s *Schema) field(name string) *Schema {
	for _, f := range s.fields {
		if f.name == name {
			return f.schema
		}
	}
	return nil
}

// equal is ConnectSchema.equals for the schemas inferred here.
func (s *Schema) equal(o *Schema) bool {
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

// Expander is JsonSchemaData.toConnectSchema with its null behaviour.
type Expander struct{ NullAsBytes bool }

// schemaOf returns n's schema, nil for none (null, an empty array).
// key is the struct name path; hasKey false is Java's null key.
func (in Expander) schemaOf(key string, hasKey bool, n *jnode) (*Schema, error) {
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
		return &Schema{typ: "array", optional: true, items: items}, nil
	case jObject:
		s := &Schema{typ: "struct", optional: true, name: key, hasName: hasKey}
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
		if in.NullAsBytes {
			return schBytes, nil
		}
	}
	return nil, nil
}

// arrayItems is toConnectSchemaWithCycles.
func (in Expander) arrayItems(key string, hasKey bool, arr *jnode) (*Schema, error) {
	var ref *jnode
	var refSchema *Schema
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
		var distinct []*Schema
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
		var merged *Schema
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
func mergeSchema(left, right *Schema) *Schema {
	if left == nil {
		return right
	}
	out := &Schema{typ: left.typ, name: left.name, hasName: left.hasName, fields: append([]cfield(nil), left.fields...)}
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
