package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// The publication can be altered while walrelay streams. pgoutput decodes
// each transaction under the publication as it stood at the transaction's
// commit in the WAL, so an ALTER PUBLICATION that adds a row filter (or
// drops the outbox, narrows a column list, turns publish_via_partition_root
// off) leaves out the rows of every later commit without a trace in the
// stream. The slot therefore is confirmed only up to a position L such that
// the publication check passed with every transaction that committed before
// L visible, in rounds run by the watch goroutine on its own connection:
//
//  1. L = pg_current_wal_insert_lsn().
//  2. S = pg_current_snapshot(), taken after L: every transaction whose
//     commit record lies before L has either left the proc array (visible
//     to every later snapshot) or is in S's xip (commit record written, proc
//     array not yet updated, e.g. waiting for a synchronous standby).
//  3. Wait until no xid of S's xip is in progress (later ticks; the receive
//     loop never waits for it), but no longer than settle (two watch
//     intervals): a transaction whose commit record lies before L leaves
//     "in progress" (clog) as soon as that record is flushed, so one still
//     in progress that long after L commits after L and cannot matter.
//     N.B. waiting for it to end instead would hold confirmation behind
//     every long writing transaction of the cluster (a batch job, a session
//     idle in transaction, a bulk outbox insert).
//  4. The publication check (pgcatalog.VerifyPublication) with a fresh
//     snapshot: every ALTER PUBLICATION committed before L is visible. If it
//     passes, positions up to L may be confirmed; if not, walrelay stops
//     with exit 2 and nothing past the last verified L is confirmed.
//
// The bound: a check sees the publication as it is, so a change made and
// undone between two rounds (at most one watch interval, 5s, plus the wait
// of step 3) is not seen, nor a change whose commit record was written
// before L but whose flush took longer than settle.
//
// When rounds run (run): one every watch interval, and, while the
// tracker's watermark is above the verified position (acknowledged
// transactions wait for the check), one as soon as the previous one is
// done and ConfirmGap after it began; the transactions of step 3 are
// polled every xidPoll meanwhile. Confirmation thus waits for one round
// trip of the check (a few queries) plus at most ConfirmGap, not for the
// watch interval: rounds run at most as often as the stream confirms, and
// only while something waits. A writing transaction of the cluster left
// open longer than settle (a batch job, a session idle in transaction)
// still holds every round for settle: the check cannot tell whether its
// commit record lies before L (step 3), and that safety is kept.
//
// While the server shuts down (no connection accepted, SQLSTATE
// 57P03) the bound is lifted for the rest of the session: the walsender
// waits for everything it sent to be confirmed before the server stops, and
// a check made between the last round and the shutdown is no longer
// possible; the check at the next start still refuses the changed
// publication.
type verifier struct {
	rc       replication.Config
	verified *atomic.Uint64 // L of the last round that passed; shared with the final round

	conn     *pgcatalog.VerifierConn
	round    *verifyRound
	interval time.Duration // the watch interval: a round at least this often
	settle   time.Duration // longest wait for the transactions of a round (step 3)
}

// xidPoll is how often run asks whether the transactions of a round (step
// 3) ended, for the first xidPollFast of the round; xidPollSlow after: a
// transaction left open is asked about twice a second, not fifty times.
const (
	xidPoll     = 20 * time.Millisecond
	xidPollFast = 500 * time.Millisecond
	xidPollSlow = 500 * time.Millisecond
)

type verifyRound struct {
	lsn   pglogrepl.LSN
	xip   []string // xid8 as text
	began time.Time
}

func newVerifier(rc replication.Config) *verifier {
	interval := rc.StatusInterval
	if interval <= 0 || interval > 5*time.Second {
		interval = 5 * time.Second // the watch loop's poll interval
	}
	return &verifier{rc: rc, verified: new(atomic.Uint64), interval: interval, settle: 2 * interval}
}

// run runs rounds until ctx is done (nil) or the check fails (an error
// wrapping replication.ErrSetup); wanted reports whether acknowledged
// positions wait for the check. Other errors drop the round, which is
// begun again at the next occasion.
func (v *verifier) run(ctx context.Context, wanted func() bool) error {
	defer v.close(ctx)
	tick := time.NewTicker(xidPoll)
	defer tick.Stop()
	var began, polled time.Time // the current or last round's start; its last step
	// N.B. after a failed step (the connection, a query), the next one
	// waits for a whole interval, as before rounds ran on demand: a
	// server that refuses the check's connection is not asked ten times a
	// second.
	var retryAt time.Time
	for {
		now := time.Now()
		if v.verified.Load() != math.MaxUint64 && !now.Before(retryAt) && roundDue(now, began, polled, v.round != nil, v.interval, wanted) {
			if v.round == nil {
				began = now
			}
			polled = now
			sctx, cancel := context.WithTimeout(ctx, v.interval)
			_, err := v.step(sctx)
			cancel()
			if errors.Is(err, replication.ErrSetup) {
				return err
			}
			if err != nil {
				retryAt = now.Add(v.interval)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// roundDue decides whether run steps now: inRound, the round begun at
// began and last stepped at polled waits for its transactions (step 3);
// otherwise a new round begins after interval, or after ConfirmGap when
// wanted says that acknowledged positions wait for the check (called only
// then).
func roundDue(now, began, polled time.Time, inRound bool, interval time.Duration, wanted func() bool) bool {
	if inRound {
		wait := xidPoll
		if now.Sub(began) >= xidPollFast {
			wait = xidPollSlow
		}
		return now.Sub(polled) >= wait
	}
	since := now.Sub(began)
	return since >= interval || (since >= replication.ConfirmGap && wanted())
}

// final runs one whole round on a connection of its own (the watch
// goroutine may still be in one), for the final status update of a graceful
// stop: everything received is covered, so nothing acknowledged is left
// to be sent again.
func (v *verifier) final(ctx context.Context) error {
	f := &verifier{rc: v.rc, verified: v.verified, interval: v.interval, settle: v.settle}
	defer f.close(ctx)
	for {
		done, err := f.step(ctx)
		if done || errors.Is(err, replication.ErrSetup) || f.verified.Load() == math.MaxUint64 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Verified is the position up to which the publication is verified.
func (v *verifier) Verified() pglogrepl.LSN { return pglogrepl.LSN(v.verified.Load()) }

// step advances the current round as far as it goes without waiting: it
// begins one, or finishes it once its transactions have ended. It returns an
// error wrapping replication.ErrSetup when the check fails; other errors
// (the connection) drop the round, to be begun again.
func (v *verifier) step(ctx context.Context) (done bool, err error) {
	defer func() {
		if err != nil && !errors.Is(err, replication.ErrSetup) && v.conn != nil {
			v.conn.Close(context.WithoutCancel(ctx))
			v.conn, v.round = nil, nil
			// N.B. at once: a server shutting down is seen within this
			// step, not the next one.
			if c, cerr := v.connect(ctx); cerr == nil {
				v.conn = c
			}
		}
	}()
	if v.conn == nil {
		c, err := v.connect(ctx)
		if err != nil {
			return false, err
		}
		v.conn = c
	}
	if v.round == nil {
		r := verifyRound{began: time.Now()}
		if r.lsn, err = v.conn.WALInsertPosition(ctx); err != nil {
			return false, err
		}
		// N.B. a statement of its own: its snapshot is taken after L.
		if r.xip, err = v.conn.RunningXIDs(ctx); err != nil {
			return false, err
		}
		v.round = &r
	}
	if len(v.round.xip) > 0 {
		open, err := v.conn.InProgress(ctx, v.round.xip)
		if err != nil {
			return false, err
		}
		if open > 0 && time.Since(v.round.began) < v.settle {
			return false, nil
		}
	}
	if err := v.conn.VerifyPublication(ctx); err != nil {
		if errors.Is(err, replication.ErrSetup) {
			return false, fmt.Errorf("publication %q changed while streaming; nothing after %s is confirmed: %w", v.rc.Publication, v.Verified(), err)
		}
		return false, fmt.Errorf("verify publication: %w", err)
	}
	// N.B. only upwards: the check covered every commit before round.lsn.
	if uint64(v.round.lsn) > v.verified.Load() {
		v.verified.Store(uint64(v.round.lsn))
	}
	v.round = nil
	return true, nil
}

// connect opens the check's connection. N.B. cannot_connect_now (57P03)
// while this stream runs means the server shuts down (or restarts after a
// crash). A shutting down server's walsender waits for the client to
// confirm everything it sent, the shutdown checkpoint included, which no
// check can cover any more: the bound is lifted for the rest of this
// session, or every shutdown would wait for wal_sender_timeout. No
// transaction commits any more, and the check at the next start refuses a
// changed publication.
func (v *verifier) connect(ctx context.Context) (*pgcatalog.VerifierConn, error) {
	c, err := pgcatalog.ConnectVerifier(ctx, v.rc)
	if pgcatalog.ShuttingDown(err) {
		v.verified.Store(math.MaxUint64)
	}
	return c, err
}

// close releases the connection.
func (v *verifier) close(ctx context.Context) {
	if v.conn != nil {
		v.conn.Close(context.WithoutCancel(ctx))
		v.conn = nil
	}
}

// boundedConfirmer is the tracker as the stream sees it: its watermark, and
// a keepalive's WAL end, bounded by the verified position.
type boundedConfirmer struct {
	*checkpoint.Tracker
	v *verifier
}

func (b boundedConfirmer) Watermark() pglogrepl.LSN {
	return min(b.Tracker.Watermark(), b.v.Verified())
}
func (b boundedConfirmer) Bound() pglogrepl.LSN { return b.v.Verified() }
