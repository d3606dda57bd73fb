package connect

import (
	"errors"
	"fmt"
	"io"
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
// the converter: here an error (the caller's poison event). A top-level [] has no
// schema: the payload stays a string, with a null schema.

// Expansion is what expanding one payload gave.
type Expansion struct {
	Done   bool    // expanded: Schema and Data hold it
	Schema *Schema // nil with Done: no schema (a top-level [])
	Data   []byte  // the JSON of the value (Done and Schema != nil)
}

// Expand expands the text of a payload, the value of column payloadColumn
// (the name of the inferred struct), or reports it left as it is (Done
// false); an error wraps errConverter.
func (in Expander) Expand(payloadColumn string, text []byte) (Expansion, error) {
	if len(text) == 0 || text[0] != '{' && text[0] != '[' {
		return Expansion{}, nil
	}
	n, err := parseJSON(text)
	if err != nil && !errors.Is(err, io.EOF) || n == nil {
		return Expansion{}, nil // N.B. Debezium logs "JSON expansion failed" and leaves it
	}
	s, err := in.schemaOf(payloadColumn, true, n)
	if err != nil {
		return Expansion{}, nil
	}
	if s == nil {
		// N.B. a top-level []: the schema becomes null, the value stays
		// the string (toConnectData fails on the null schema and is
		// caught).
		return Expansion{Done: true}, nil
	}
	if n.kind != jObject {
		// N.B. a top-level array: toConnectData makes a Struct of it,
		// which fails and is caught, leaving the string under an array
		// schema, which the converter refuses.
		return Expansion{}, fmt.Errorf("%w (a top-level JSON array)", errConverter)
	}
	data, err := appendData(nil, s, n)
	if err != nil {
		return Expansion{}, err
	}
	return Expansion{Done: true, Schema: s, Data: data}, nil
}
