package decode

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// PostgreSQL partition roots (here "partition" is Kafka's: a PostgreSQL
// partition is a leaf partition of a partition root). pgoutput names a leaf
// partition's rows after the leaf partition unless the publication has
// publish_via_partition_root; it then still sends each leaf partition's
// Relation message after its root's. A decoder that took such rows for
// another table's would confirm past events it never relayed, so with
// Config.ResolvePartitionRoots every relation that is not an outbox waits
// until the caller, who may do I/O, has asked PostgreSQL which partition
// tree it belongs to (pg_partition_root) and said so with Resolve.

// addRelation caches a Relation message's relation, held back for Resolve
// when it is not an outbox.
//
// An outbox whose columns no longer match the mapping is an error
// wrapping ErrSchemaChanged (schemachange.go).
func (d *Decoder) addRelation(m pgoutput.Relation) error {
	prev := d.relations[m.ID]
	rel := d.mapRelation(m)
	d.relations[m.ID] = rel
	if rel.outbox && rel.err != nil {
		return d.unmappable(prev, m, rel)
	}
	if rel.outbox || !d.cfg.ResolvePartitionRoots {
		return nil
	}
	// N.B. a relation is resolved again at each Relation message: pgoutput
	// sends one after the relation changed, ATTACH PARTITION included.
	rel.pending = true
	for i, p := range d.pending {
		if p.ID == m.ID {
			d.pending = append(d.pending[:i], d.pending[i+1:]...)
			break
		}
	}
	d.pending = append(d.pending, m)
	return nil
}

// Unresolved returns a relation that waits for Resolve: its OID and its
// schema-qualified name. ok is false when none waits. With
// Config.ResolvePartitionRoots, call it after each Decode.
func (d *Decoder) Unresolved() (oid uint32, table string, ok bool) {
	if len(d.pending) == 0 {
		return 0, "", false
	}
	m := d.pending[0]
	return m.ID, m.Namespace + "." + m.Name, true
}

// Resolve says what relation oid, awaiting it, is: root is its partition
// root, schema-qualified ("" when it is in no partition tree), and exists
// is false when the relation is no longer in the catalog. When root is an
// outbox, the relation is a leaf partition of it, and its rows are that
// outbox's events.
func (d *Decoder) Resolve(oid uint32, root string, exists bool) error {
	i := -1
	for j, p := range d.pending {
		if p.ID == oid {
			i = j
			break
		}
	}
	if i < 0 {
		return fmt.Errorf("resolve relation %d: it does not wait to be resolved", oid)
	}
	m := d.pending[i]
	d.pending = append(d.pending[:i], d.pending[i+1:]...)
	rel := d.relations[oid]
	switch {
	case !exists:
		rel.gone = true
	case d.tables[root]:
		rel = d.mapRelationAs(m, root)
		rel.leaf = m.Namespace + "." + m.Name
		d.relations[oid] = rel
		if rel.err != nil {
			// N.B. the leaf's previous columns are gone: no rename is told.
			err := d.unmappable(nil, m, rel)
			rel.pending = false
			return err
		}
	}
	rel.pending = false
	return nil
}

// warnLeafPartition logs, once per relation and session, that an outbox's
// rows arrive under a leaf partition's name. N.B. its log key "partition"
// (the leaf partition) is the one it always had.
func (d *Decoder) warnLeafPartition(rel *relation) {
	rel.warned = true
	d.log.Warn("rows of an outbox partition arrive under the partition's name (the publication's publish_via_partition_root was off when they were written); relaying them as the outbox's events",
		zap.String("partition", rel.leaf), zap.String("table", rel.qualified))
}

// warnGone logs, once per relation and session, that rows of a dropped
// table were not relayed.
func (d *Decoder) warnGone(rel *relation) {
	rel.warned = true
	d.log.Warn("rows of a table that no longer exists are not relayed: if it was a partition of an outbox written while the publication's publish_via_partition_root was off, its events are lost",
		zap.String("table", rel.qualified))
}
