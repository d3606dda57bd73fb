package decode

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode/connect"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// Decoder assembles pgoutput messages into transactions. It is not safe for
// concurrent use.
type Decoder struct {
	cfg       Config
	tables    map[string]bool
	template  Template       // the topic template (Config.topicTemplate)
	mapped    []mappedColumn // the columns the configuration names (mapping.go)
	log       *zap.Logger
	relations map[uint32]*relation
	pending   []pgoutput.Relation // relations awaiting Resolve, oldest first

	cur   *Tx
	tx    pgoutput.TxState // Begin and Commit: the same code replication follows
	bytes int
	cols  []pgoutput.TupleCol
	buf   []byte
	re    *connect.RegexRouter
	// Scratch for the json formats: the key, the value, a bytea's bytes.
	kbuf, vbuf, tmp []byte
	msg             messageSource // Config.Messages (message.go)
	// structs caches the json-schema envelope's struct schema as Debezium
	// does (format.go, appendEnvelopeSchema).
	structs map[string]string
	// typeNames are the names of types from their Type messages (typeres.go).
	typeNames map[uint32]string

	Stats Stats
}

// New returns a decoder for cfg.
func New(cfg Config, log *zap.Logger) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tmpl, _ := cfg.topicTemplate()
	d := &Decoder{
		cfg:       cfg,
		tables:    make(map[string]bool),
		template:  tmpl,
		mapped:    cfg.mappedColumns(tmpl),
		log:       log.Named("decode"),
		relations: make(map[uint32]*relation),
	}
	if cfg.TopicRegex != "" {
		d.re, _ = connect.CompileRegexRouter(cfg.TopicRegex, cfg.Topic)
	}
	for _, t := range cfg.Tables {
		if cfg.NoTables {
			break
		}
		s, n, _ := SplitTable(t)
		d.tables[s+"."+n] = true
	}
	if cfg.Messages {
		if err := d.initMessages(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// InTx reports whether a transaction has begun and not yet committed.
func (d *Decoder) InTx() bool { return d.tx.InTx() }

// Decode consumes one pgoutput message (the WAL data of one XLogData). It
// returns a Tx part when one is complete: at every Commit, and inside a
// transaction whenever what its events hold reaches Config.MaxPartBytes.
// Nothing returned points into msg: the caller may reuse or drop it.
//
// N.B. parse by first byte, one method per kind, as pglogrepl's Parse; the
// kinds are not boxed into an interface for a type switch, which would
// allocate once per row.
func (d *Decoder) Decode(msg []byte) (*Tx, error) {
	if len(msg) == 0 {
		return nil, errors.New("empty pgoutput message")
	}
	switch msg[0] {
	case pgoutput.KindBegin:
		return nil, d.begin(msg)
	case pgoutput.KindCommit:
		return d.commit(msg)
	case pgoutput.KindRelation:
		return nil, d.relationMessage(msg)
	case pgoutput.KindInsert:
		return d.insert(msg)
	case pgoutput.KindUpdate:
		return nil, d.update(msg)
	case pgoutput.KindDelete:
		return nil, d.delete(msg)
	case pgoutput.KindTruncate:
		return nil, d.truncate(msg)
	case pgoutput.KindLogicalMessage:
		return d.message(msg)
	case pgoutput.KindType:
		return nil, d.typeMessage(msg)
	case pgoutput.KindOrigin:
		return nil, skip(msg)
	default:
		return nil, fmt.Errorf("unexpected pgoutput message type %q (streaming of in-progress transactions is not requested)", msg[0])
	}
}

func (d *Decoder) begin(msg []byte) error {
	if _, err := d.tx.Begin(msg); err != nil {
		return err
	}
	d.newPart(true)
	return nil
}

func (d *Decoder) commit(msg []byte) (*Tx, error) {
	c, err := d.tx.Commit(msg)
	if err != nil {
		return nil, err
	}
	tx := d.cur
	tx.EndLSN, tx.Last = c.EndLSN, true
	d.cur = nil
	d.Stats.Transactions++
	return tx, nil
}

func (d *Decoder) relationMessage(msg []byte) error {
	r, err := pgoutput.ParseRelation(msg)
	if err != nil {
		return err
	}
	return d.addRelation(r)
}

// update and delete read the whole message, so that a truncated one is an
// error, and count it; neither is ever an event. N.B. their tuples go to
// d.cols' room and are dropped: a larger one allocates, a rare case (the
// publication sends inserts only, by default).
func (d *Decoder) update(msg []byte) error {
	if !d.tx.InTx() {
		return errors.New("U message outside a transaction: protocol out of sync")
	}
	u, err := pgoutput.ParseUpdate(msg, d.cols)
	return d.change(u.RelationID, err)
}

func (d *Decoder) delete(msg []byte) error {
	if !d.tx.InTx() {
		return errors.New("D message outside a transaction: protocol out of sync")
	}
	m, err := pgoutput.ParseDelete(msg, d.cols)
	return d.change(m.RelationID, err)
}

// change counts an update or delete of relation id that parsed with err.
func (d *Decoder) change(id uint32, err error) error {
	if err != nil {
		return err
	}
	rel, err := d.relation(id, nil)
	if err != nil {
		return err
	}
	d.count(rel.outbox)
	return nil
}

func (d *Decoder) truncate(msg []byte) error {
	if !d.tx.InTx() {
		return errors.New("truncate outside a transaction: protocol out of sync")
	}
	m, err := pgoutput.ParseTruncate(msg)
	if err != nil {
		return err
	}
	for _, id := range m.RelationIDs {
		rel, err := d.relation(id, nil)
		if err != nil {
			return err
		}
		d.count(rel.outbox)
	}
	return nil
}

// skip reads an origin message only to reject a truncated one: it
// carries no outbox rows.
func skip(msg []byte) error {
	_, err := pgoutput.ParseOrigin(msg)
	return err
}

func (d *Decoder) count(outbox bool) {
	if outbox {
		d.Stats.Ignored++
	} else {
		d.Stats.OtherTables++
	}
}

func (d *Decoder) newPart(first bool) {
	b := d.tx.Current()
	d.cur = &Tx{
		Xid:        b.Xid,
		CommitLSN:  b.FinalLSN,
		CommitTime: b.CommitTime,
		First:      first,
	}
	d.bytes = 0
}

func (d *Decoder) insert(msg []byte) (*Tx, error) {
	if !d.tx.InTx() {
		return nil, errors.New("insert outside a transaction: protocol out of sync")
	}
	ins, err := pgoutput.ParseInsert(msg, d.cols)
	d.cols = ins.New
	rel, rerr := d.relation(ins.RelationID, nil)
	switch {
	case err != nil && rerr == nil:
		return nil, fmt.Errorf("insert into %s: %w", rel.qualified, err)
	case err != nil:
		return nil, err
	case rerr != nil:
		return nil, rerr
	}
	if !rel.outbox {
		if rel.gone && !rel.warned {
			d.warnGone(rel)
		}
		d.Stats.OtherTables++
		return nil, nil
	}
	if rel.leaf != "" && !rel.warned {
		d.warnLeafPartition(rel)
	}
	d.Stats.Inserts++
	return d.add(d.event(rel, d.cols)), nil
}

// add appends ev to the current part and returns the part when it is full.
func (d *Decoder) add(ev Event) *Tx {
	d.cur.Events = append(d.cur.Events, ev)
	// N.B. what the event holds, poison events included: a part is a
	// bound on memory, not only on record bytes.
	d.bytes += d.cur.Events[len(d.cur.Events)-1].Held()
	if d.bytes < d.cfg.MaxPartBytes {
		return nil
	}
	tx := d.cur
	d.newPart(false)
	return tx
}
