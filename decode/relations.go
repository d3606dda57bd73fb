package decode

import (
	"fmt"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// relation is the decoder's cache entry for one relation (by OID, from its
// latest Relation message): whether it is an outbox and, if so, where each
// mapped column is and what the record formats write around it.
type relation struct {
	qualified string
	outbox    bool
	columns   []pgoutput.Column // each type resolved through Config.Types
	// sent are the Relation message's columns, their types as sent, when
	// one of them was resolved (nil: columns are as sent).
	sent []pgoutput.Column
	err  error // the relation cannot be mapped (problems: the mapped columns in question)
	// problems are the mapped columns the relation lacks or has with a type
	// their flag does not take (schemachange.go).
	problems []mappingProblem

	idIdx, keyIdx, payloadIdx int
	payloadBytea              bool
	headerIdx                 []int
	partIdx, stampIdx         int // -1: not configured
	traceIdx                  int // the trace-context column (tracecontext.go); -1: none
	routeIdx, versionIdx      int // the json-schema envelope's route and version columns; -1: none
	topicParts                []templatePart
	topicCols                 []int
	topics                    map[string]string // rendered template values → validated topic
	topicErrs                 map[string]error

	// The json formats (format.go): what goes before and after the JSON
	// of the key and of the payload, the envelope fields' columns, their
	// `,"alias":` and how each is written.
	keyPre, keySuf, valPre, valSuf string
	keyKind, payloadKind           jsonKind
	envIdx                         []int
	envNames                       []string
	envKinds                       []jsonKind
	// json-schema with envelope fields: the payload column's schema and
	// the struct's fields (the payload's and each placed column's).
	payloadSchema, envFields string

	// Set with Config.ResolvePartitionRoots (partitionroot.go): pending
	// until Resolve; leaf names the leaf partition whose rows are this
	// outbox's; gone is a relation no longer in the catalog; warned once it
	// is logged.
	pending, gone, warned bool
	leaf                  string
}

func (d *Decoder) relation(id uint32, err error) (*relation, error) {
	if err != nil {
		return nil, err
	}
	rel, ok := d.relations[id]
	if !ok {
		return nil, fmt.Errorf("change for relation %d before its Relation message: protocol out of sync", id)
	}
	if rel.pending {
		return nil, fmt.Errorf("change for relation %s (oid %d) before Resolve said whether it is a partition of an outbox", rel.qualified, id)
	}
	return rel, nil
}

// mapRelation resolves the configured column mapping against a relation.
func (d *Decoder) mapRelation(m pgoutput.Relation) *relation {
	return d.mapRelationAs(m, m.Namespace+"."+m.Name)
}

// mapRelationAs maps relation m as table qualified: itself, or the outbox
// m is a leaf partition of.
func (d *Decoder) mapRelationAs(m pgoutput.Relation, qualified string) *relation {
	rel := newRelation(qualified, m.Columns)
	rel.outbox = d.tables[rel.qualified]
	if !rel.outbox {
		return rel
	}
	return d.mapOutbox(rel, m)
}

// newRelation is a relation qualified with columns, no column mapped yet.
func newRelation(qualified string, columns []pgoutput.Column) *relation {
	return &relation{
		qualified: qualified,
		columns:   columns,
		idIdx:     -1, keyIdx: -1, payloadIdx: -1, partIdx: -1, stampIdx: -1, routeIdx: -1, versionIdx: -1, traceIdx: -1,
	}
}

// sentType is the type of column i as the Relation message sent it.
func (r *relation) sentType(i int) uint32 {
	if r.sent != nil {
		return r.sent[i].TypeOID
	}
	return r.columns[i].TypeOID
}
