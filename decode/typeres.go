package decode

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/decode/connect"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// Types that are not built in. pgoutput sends a column's own type OID (a
// domain's, an enum's, citext's) and, for a type that is not built in, a
// Type message with its name only. decode does no I/O, so the check at
// start resolves each such type from the catalog (pgcatalog) and hands the
// decoder the resolution (Config.Types): a column is then read as the
// built-in type its values are written in.

// BaseType is what a type that is not built in is read as.
type BaseType struct {
	// OID is the built-in type its values are read as: a domain's base
	// type (through domains over domains), text for an enum or citext.
	OID uint32
	// Name is the type's name as format_type writes it, for messages.
	Name string
	// Enum is set for an enum (or a domain over one): json-schema writes it
	// as Debezium does, a string named io.debezium.data.Enum whose
	// "allowed" parameter lists Labels, in their sort order.
	Enum   bool
	Labels []string
}

// Types maps type OIDs that are not built in to what they are read as.
type Types map[uint32]BaseType

// firstNormalOID is PostgreSQL's FirstNormalObjectId: a type OID below it
// is built in (initdb's), one above it a user's or an extension's.
const firstNormalOID = 16384

// resolveColumns returns cols with each type resolved through t (the
// Relation message's slice itself when none is), and whether one was.
func (t Types) resolveColumns(cols []pgoutput.Column) ([]pgoutput.Column, bool) {
	var out []pgoutput.Column
	for i, c := range cols {
		b, ok := t[c.TypeOID]
		if !ok {
			continue
		}
		if out == nil {
			out = append([]pgoutput.Column(nil), cols...)
		}
		out[i].TypeOID = b.OID
	}
	if out == nil {
		return cols, false
	}
	return out, true
}

// enumSchema is Debezium's schema of an enum column: a string named
// io.debezium.data.Enum with its labels as "allowed" (JsonConverter's
// order: type, optional, name, version, parameters).
func enumSchema(labels []string, optional bool) string {
	var b strings.Builder
	b.WriteString(`{"type":"string","optional":`)
	b.WriteString(strconv.FormatBool(optional))
	b.WriteString(`,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":`)
	b.Write(connect.AppendJSONString(nil, []byte(strings.Join(labels, ","))))
	b.WriteString(`}}`)
	return b.String()
}

// typeLabel names type oid for a message: its built-in name, the name the
// check at start resolved, or the Type message's, and the OID.
func (d *Decoder) typeLabel(oid uint32) string {
	if n, ok := typeName[oid]; ok {
		return n
	}
	if b, ok := d.cfg.Types[oid]; ok {
		return fmt.Sprintf("%s (oid %d)", b.Name, oid)
	}
	if n, ok := d.typeNames[oid]; ok {
		return fmt.Sprintf("%s (oid %d)", n, oid)
	}
	return fmt.Sprintf("oid %d", oid)
}

// typeMessage records the name of a type from its Type message, for
// messages about a column of a type the check at start did not resolve.
func (d *Decoder) typeMessage(msg []byte) error {
	t, err := pgoutput.ParseType(msg)
	if err != nil {
		return err
	}
	if d.typeNames == nil {
		d.typeNames = make(map[uint32]string)
	}
	if len(d.typeNames) < 1024 {
		d.typeNames[t.ID] = t.Namespace + "." + t.Name
	}
	return nil
}
