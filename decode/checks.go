package decode

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

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

// SuggestedType is the SQL name of a type the column flag names may be
// changed to (the first the flag takes), for the fix in a message; "" for
// a flag that takes any type.
func SuggestedType(flag string) string {
	set, ok := columnTypes[flag]
	if !ok {
		return ""
	}
	if set[0] == oidStamp {
		return "timestamp"
	}
	return typeName[set[0]]
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
