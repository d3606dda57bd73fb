package harness

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ExactlyOnce makes every StartRelay of e run with --exactly-once and a
// checkpoint topic of e's own.
func (e *Env) ExactlyOnce() {
	e.RelayArgs = append(e.RelayArgs, "--exactly-once", "--checkpoint-topic", e.CheckpointTopic())
}

// CheckpointTopic is e's checkpoint topic in exactly-once mode.
func (e *Env) CheckpointTopic() string { return "walrelay.checkpoints." + e.Prefix }

// CheckpointKey is the key walrelay writes e's checkpoints under, read
// from PostgreSQL: eos/<system identifier>/<database>/<slot>.
func (e *Env) CheckpointKey(t testing.TB) string {
	t.Helper()
	var sysid string
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&sysid); err != nil {
		t.Fatalf("read system identifier: %v", err)
	}
	return "eos/" + sysid + "/" + e.Database(t) + "/" + e.Slot
}

// TxReport is what CheckTransactions found.
type TxReport struct {
	KafkaTxns   int // Kafka transactions with records, as read_committed shows them
	Checkpoints int // checkpoint records of the key
	PGTxns      int // PostgreSQL transactions (commit ends) with records
	MaxPGTxns   int // most PostgreSQL transactions in one Kafka transaction
	// Partial counts records that lie in another Kafka transaction than
	// the one whose checkpoint range holds their PostgreSQL transaction:
	// a consumer at that transaction's end saw part of it.
	Partial  int
	Problems []string
}

func (r TxReport) String() string {
	return fmt.Sprintf("kafka_transactions=%d checkpoints=%d pg_transactions=%d max_pg_per_kafka_transaction=%d partial_transactions=%d problems=%d",
		r.KafkaTxns, r.Checkpoints, r.PGTxns, r.MaxPGTxns, r.Partial, len(r.Problems))
}

// OK reports whether every PostgreSQL transaction lies whole in one Kafka
// transaction with its checkpoint.
func (r TxReport) OK() bool { return r.Partial == 0 && len(r.Problems) == 0 }

func (r *TxReport) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// CheckTransactions judges what read_committed consumers saw (recs: the
// outbox topics and the checkpoint topic, read with ConsumeAllSettled).
// A Kafka transaction is told by its producer id and epoch (Kafka 4 bumps
// the epoch at every transaction, KIP-890); each must hold exactly one
// checkpoint record of key, and the checkpoints cut the LSN line into
// ranges: every record's PostgreSQL transaction (its commit end) must lie
// in the range of the Kafka transaction the record is in, (previous
// checkpoint, this checkpoint]. So no PostgreSQL transaction is split over
// two Kafka transactions, and a consumer positioned after any Kafka
// transaction has all or nothing of each PostgreSQL transaction.
func CheckTransactions(recs []*kgo.Record, checkpointTopic, key string, committed []Event) TxReport {
	var rep TxReport
	ends := make(map[string]pglogrepl.LSN, len(committed))
	for _, ev := range committed {
		ends[ev.ID] = ev.CommitEnd
	}
	type txnID struct {
		pid   int64
		epoch int16
	}
	type txn struct {
		id          txnID
		checkpoints []pglogrepl.LSN
		records     []*kgo.Record
		pg          map[pglogrepl.LSN]bool
	}
	txns := map[txnID]*txn{}
	get := func(r *kgo.Record) *txn {
		id := txnID{r.ProducerID, r.ProducerEpoch}
		x := txns[id]
		if x == nil {
			x = &txn{id: id, pg: map[pglogrepl.LSN]bool{}}
			txns[id] = x
		}
		return x
	}
	pg := map[pglogrepl.LSN]bool{}
	for _, r := range recs {
		if r.Topic == checkpointTopic {
			if string(r.Key) != key {
				continue
			}
			rep.Checkpoints++
			var c struct {
				EndLSN string `json:"end_lsn"`
			}
			lsn, err := pglogrepl.LSN(0), json.Unmarshal(r.Value, &c)
			if err == nil {
				lsn, err = pglogrepl.ParseLSN(c.EndLSN)
			}
			if err != nil {
				rep.problem("checkpoint at %s[%d]@%d: %v", r.Topic, r.Partition, r.Offset, err)
				continue
			}
			x := get(r)
			x.checkpoints = append(x.checkpoints, lsn)
			continue
		}
		if !r.Attrs.IsTransactional() {
			rep.problem("record at %s[%d]@%d was not written in a transaction", r.Topic, r.Partition, r.Offset)
			continue
		}
		id, _ := Header(r, "id")
		end, ok := ends[id]
		if !ok {
			continue // a phantom: Check counts it
		}
		x := get(r)
		x.records = append(x.records, r)
		x.pg[end] = true
		pg[end] = true
	}
	rep.PGTxns = len(pg)
	var ordered []*txn
	for _, x := range txns {
		switch {
		case len(x.checkpoints) == 0:
			rep.problem("kafka transaction (producer %d, epoch %d) holds %d records and no checkpoint", x.id.pid, x.id.epoch, len(x.records))
		case len(x.checkpoints) > 1:
			rep.problem("kafka transaction (producer %d, epoch %d) holds %d checkpoints %v: epochs do not tell transactions apart", x.id.pid, x.id.epoch, len(x.checkpoints), x.checkpoints)
		default:
			ordered = append(ordered, x)
		}
	}
	slices.SortFunc(ordered, func(a, b *txn) int { return cmp.Compare(a.checkpoints[0], b.checkpoints[0]) })
	var prev pglogrepl.LSN
	for _, x := range ordered {
		end := x.checkpoints[0]
		if len(x.records) > 0 {
			rep.KafkaTxns++
			rep.MaxPGTxns = max(rep.MaxPGTxns, len(x.pg))
		}
		for _, r := range x.records {
			id, _ := Header(r, "id")
			if ce := ends[id]; ce <= prev || ce > end {
				rep.Partial++
				rep.problem("partial: record %s (transaction ending %s) at %s[%d]@%d is in the kafka transaction of checkpoint range (%s, %s]",
					id, ce, r.Topic, r.Partition, r.Offset, prev, end)
			}
		}
		prev = end
	}
	return rep
}

// KafkaEndTxn selects an EndTxn request (API key 26): the broker commits
// or aborts, and a cut keeps the outcome from the producer.
func KafkaEndTxn(dir Dir, msg []byte) bool {
	return dir == ToServer && len(msg) >= 6 && binary.BigEndian.Uint16(msg[4:]) == 26
}

// KafkaFetch selects a fetch request (API key 1): walrelay fetches only to
// read its checkpoint at the start of an attempt.
func KafkaFetch(dir Dir, msg []byte) bool {
	return dir == ToServer && len(msg) >= 6 && binary.BigEndian.Uint16(msg[4:]) == 1
}
