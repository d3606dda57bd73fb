package connect

import "slices"

// Record formats: the bytes Kafka Connect's converters write for the
// Outbox Event Router's key and value (Debezium 3.6.1 on Kafka Connect
// 4.3.1, checked byte for byte by `make compat`).
const (
	// FormatString is Connect's StringConverter: the column's text as
	// the source renders it (a bytea's bytes). The default.
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

// Formats lists the formats, FormatBytes last (the one a key cannot have).
func Formats() []string { return slices.Clone(formats) }

// ValidFormat reports whether f is one of the formats.
func ValidFormat(f string) bool {
	for _, x := range formats {
		if f == x {
			return true
		}
	}
	return false
}

// WithField is a field's schema in a struct: schema s with "field":name
// last (JsonConverter.asJsonSchema puts it after the field's own keys).
func WithField(s, name string) string {
	if s == "" {
		return ""
	}
	return s[:len(s)-1] + `,"field":` + string(AppendJSONString(nil, []byte(name))) + "}"
}

// EnvelopeSchema is the struct schema of an envelope as the router builds
// it and JsonConverter writes it: the payload's field (schema
// payloadSchema, field "payload"), then fields (each ","+WithField(...)),
// "optional":false, the struct's name, and its version unless version is
// "".
func EnvelopeSchema(payloadSchema, fields, name, version string) string {
	s := `{"type":"struct","fields":[` + WithField(payloadSchema, "payload") + fields + `],"optional":false,"name":` + string(AppendJSONString(nil, []byte(name)))
	if version != "" {
		s += `,"version":` + version
	}
	return s + "}"
}
