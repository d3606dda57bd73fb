package sink

import (
	"context"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
)

// delivery is the sink's delivery strategy: what it does around the
// records of a transaction so that the tracker may count the transaction
// as delivered. atLeastOnce needs nothing beyond Kafka's acknowledgements;
// exactlyOnce (exactlyonce.go) puts whole transactions and a checkpoint
// record into Kafka transactions, skips what a committed checkpoint
// covers, and holds each transaction below the watermark until its Kafka
// transaction committed. Its methods are called from the producing
// goroutine, lock to unlock around each Produce call.
type delivery interface {
	// start readies the strategy once a broker answered (Start).
	start(ctx context.Context) error
	// holdsSlot says that the replication stream holds the slot
	// (HoldsSlot); safe from any goroutine, more than once.
	holdsSlot()
	// lock and unlock bracket a whole Produce call.
	lock()
	unlock()
	// begin is called for every part before anything of it is produced;
	// skip: the part is done as it is (a checkpoint covers it).
	begin(ctx context.Context, tx *decode.Tx) (skip bool, err error)
	// join is called before a part's n records are produced; x is the
	// transaction in the tracker.
	join(x *checkpoint.Tx, n int) error
	// last is called once a transaction's last part is produced.
	last(ctx context.Context, tx *decode.Tx) error
	// flush ends what is open before Flush waits for the client.
	flush(ctx context.Context) error
	// close ends what is open before Close discards the client.
	close()
	// haltsOnRejected says why a record Kafka rejected on its own halts
	// whatever --on-poison says; "" when it need not.
	haltsOnRejected() string
}

// atLeastOnce is the default delivery: a transaction is delivered once
// Kafka acknowledged its records, which the idempotent producer writes
// once and in order (a restart may send them again).
type atLeastOnce struct{}

func (atLeastOnce) start(context.Context) error                     { return nil }
func (atLeastOnce) holdsSlot()                                      {}
func (atLeastOnce) lock()                                           {}
func (atLeastOnce) unlock()                                         {}
func (atLeastOnce) begin(context.Context, *decode.Tx) (bool, error) { return false, nil }
func (atLeastOnce) join(*checkpoint.Tx, int) error                  { return nil }
func (atLeastOnce) last(context.Context, *decode.Tx) error          { return nil }
func (atLeastOnce) flush(context.Context) error                     { return nil }
func (atLeastOnce) close()                                          {}
func (atLeastOnce) haltsOnRejected() string                         { return "" }
