package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// markerInterval is the longest time the slot's marker lags its confirmed
// position while the position moves.
const markerInterval = 5 * time.Second

// markerStopWait is how long a stop waits for the last marker refresh.
const markerStopWait = 5 * time.Second

// history is the relay's replication.History: the markers this process
// wrote or read, else the marker topic.
type history struct {
	mu    sync.Mutex
	known map[string]kafkastate.Marker // by kafkastate.Key
	store *kafkastate.Store            // opened by the first attempt that reaches Kafka
	// shared: store is the process's (SharedMarkers), never closed here;
	// snap its snapshot, until the first LastConfirmed.
	shared bool
	snap   *kafkastate.Snapshot
}

func (h *history) setStore(s *kafkastate.Store) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.store = s
}

func (h *history) getStore() *kafkastate.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.store
}

// has reports whether the slot's marker is known to exist.
func (h *history) has(system, database, slot string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.known[kafkastate.Key(system, database, slot)]
	return ok
}

// close closes the store.
func (h *history) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store != nil && !h.shared {
		h.store.Close()
		h.store = nil
	}
}

// LastConfirmed implements replication.History.
//
// N.B. a marker this process wrote is answered from memory: a reconnect
// that finds the slot gone stops even when Kafka cannot be read.
func (h *history) LastConfirmed(ctx context.Context, system, database, slot string) (pglogrepl.LSN, time.Time, bool, error) {
	key := kafkastate.Key(system, database, slot)
	h.mu.Lock()
	m, ok := h.known[key]
	h.mu.Unlock()
	if ok {
		lsn, err := m.LSN()
		return lsn, m.UpdatedAt, err == nil, err
	}
	return h.LastConfirmedNow(ctx, system, database, slot)
}

// LastConfirmedNow implements replication.History: the marker topic (or
// the process's snapshot of it, the first time, while fresh), never what
// this process remembers. N.B. a marker remembered goes stale when
// another instance takes the slot over and then recovers it: streaming
// from the recovery's slot before its rows are in Kafka would put an
// aggregate's later events before its earlier ones.
func (h *history) LastConfirmedNow(ctx context.Context, system, database, slot string) (pglogrepl.LSN, time.Time, bool, error) {
	lsn, at, found, used, err := h.fromSnapshot(system, database, slot)
	if !used {
		store := h.getStore()
		if store == nil {
			return 0, time.Time{}, false, nil
		}
		lsn, at, found, err = store.LastConfirmed(ctx, system, database, slot)
	}
	if found {
		h.remember(kafkastate.Marker{Slot: slot, Database: database, SystemIdentifier: system, ConfirmedLSN: lsn.String(), UpdatedAt: at})
	}
	if err != nil && !errors.Is(err, kafkastate.ErrRecoveryUnfinished) {
		return lsn, at, found, markerReadError{err}
	}
	return lsn, at, found, unfinished(err)
}

// markerReadError is a failure to read the marker topic: the attempt that
// met it failed on Kafka's side (walrelay_restarts_total's cause), though
// in PostgreSQL's preflight.
type markerReadError struct{ error }

func (e markerReadError) Unwrap() error { return e.error }

// preflightFailed marks pgcatalog.Prepare's error with the side it failed
// on: Kafka's when the marker topic could not be read, else PostgreSQL's.
func preflightFailed(err error) error {
	if mr := (markerReadError{}); errors.As(err, &mr) {
		return onKafka(err)
	}
	return onPostgres(err)
}

// unfinished makes kafkastate's ErrRecoveryUnfinished replication's too.
func unfinished(err error) error {
	if errors.Is(err, kafkastate.ErrRecoveryUnfinished) {
		return unfinishedError{err}
	}
	return err
}

type unfinishedError struct{ error }

func (e unfinishedError) Unwrap() error        { return e.error }
func (e unfinishedError) Is(target error) bool { return target == replication.ErrRecoveryUnfinished }

func (h *history) remember(m kafkastate.Marker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known == nil {
		h.known = map[string]kafkastate.Marker{}
	}
	h.known[kafkastate.Key(m.SystemIdentifier, m.Database, m.Slot)] = m
}

// writeMarker records that the slot of st is walrelay's, confirmed at lsn,
// and waits for Kafka's acknowledgement.
func (r *Relay) writeMarker(ctx context.Context, ms *kafkastate.Store, st pgcatalog.SlotState, lsn pglogrepl.LSN) error {
	m := kafkastate.Marker{Slot: r.rc.Slot, Database: st.Database, SystemIdentifier: st.SystemID,
		ConfirmedLSN: lsn.String(), UpdatedAt: time.Now().UTC(), ConfirmedCommitTime: r.commits.before(lsn)}
	if ms != nil {
		if err := ms.Write(ctx, m); err != nil {
			return err
		}
	}
	r.hist.remember(m)
	return nil
}

// keepMarker refreshes the slot's marker with the stream's confirmed
// position at most every markerInterval, until done is closed or ctx ends.
// A failed refresh is logged and retried: the marker only has to exist, its
// position serves the log after a failover.
func (r *Relay) keepMarker(ctx context.Context, done <-chan struct{}, ms *kafkastate.Store, st pgcatalog.SlotState, stream *replication.Stream) error {
	last := st.ConfirmedFlush
	tick := time.NewTicker(markerInterval)
	defer tick.Stop()
	refresh := func(ctx context.Context) {
		c := stream.Confirmed()
		if c <= last {
			return
		}
		if err := r.writeMarker(ctx, ms, st, c); err != nil {
			r.log.Warn("refresh the slot marker", zap.String("slot", r.rc.Slot), zap.Error(err))
			return
		}
		last = c
	}
	for {
		select {
		case <-tick.C:
			// N.B. bounded, and cut short by the end of the pipeline: a
			// refresh waiting on an unreachable Kafka holds no stop up.
			tctx, cancel := cancelOn(ctx, markerInterval, done)
			refresh(tctx)
			cancel()
		case <-done:
			// N.B. the last refresh waits within the shutdown timeout
			// (a second at least, markerStopWait at most), and not past
			// an abort: Write gives up at its context's end.
			wait := markerStopWait
			if left, stopping := r.stopLeft(); stopping {
				wait = min(wait, max(left, time.Second))
			}
			fctx, cancel := cancelOn(context.WithoutCancel(ctx), wait, r.abort)
			refresh(fctx)
			cancel()
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// cancelOn is ctx with a timeout, cancelled also when c is closed.
func cancelOn(ctx context.Context, timeout time.Duration, c <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	go func() {
		select {
		case <-c:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
