package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// beginWith begins an attempt's transaction on a pooled connection and
// queues query (the id insert) in it: BEGIN and the insert go to the
// server in one round trip (pgx's Batch.BeginTx), not two (Pool.Begin,
// then Exec). Read BEGIN's result, then the insert's, from br and close it
// before tx is used. tx is never nil: roll it back (a no-op after Commit)
// to release the connection; a batch that failed before BEGIN leaves it
// closed (pgx.ErrTxClosed), the connection released.
//
// N.B. the insert still runs inside the transaction, after BEGIN, so the
// id and the Handler's effects commit together as before; a failed BEGIN
// makes the server skip the insert (a pipeline stops at its first error).
func (c *Consumer) beginWith(ctx context.Context, query string, args ...any) (tx pgx.Tx, br pgx.BatchResults) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 2)}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(query, args...)
	br = c.cfg.Pool.SendBatch(ctx, b)
	return br.Tx(), br
}
