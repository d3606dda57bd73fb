package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// bufferBatches is the capacity of the channel between replication and
// decoding, in batches (replication.BatchMessages messages at most); the
// bytes it holds are bounded by replication.BufferBytes, the bytes in
// flight to Kafka by the sink.
const bufferBatches = 16

// attempt runs one pipeline: one replication connection, one Kafka client,
// one checkpoint tracker starting at the slot's confirmed position. The
// stages are built back to front: tracker, sink, decoder, stream.
func (r *Relay) attempt(ctx context.Context, stop <-chan struct{}) error {
	r.current.Store(nil)
	ph := startPhases{at: time.Now()}
	// Columns first: nothing is created for a mapping that cannot work.
	checked, err := CheckColumns(ctx, r.rc.ConnString, r.rc.Publication, r.dc)
	if err != nil {
		return onPostgres(err)
	}
	ph.mark("columns")
	// N.B. the marker store before the slot: whether a missing slot may be
	// created depends on its marker. It lives as long as the relay (a
	// replica waiting for the slot tries every second).
	ms := r.hist.getStore()
	if ms == nil && !r.nullSink { // the benchmark's null sink has no Kafka
		var err error
		if ms, err = kafkastate.Open(ctx, r.mc, r.log); err != nil {
			return onKafka(err)
		}
		r.hist.setStore(ms)
	}
	ph.mark("marker_store")
	rc := r.rc
	rc.History = &r.hist
	st, err := pgcatalog.Prepare(ctx, rc, r.log)
	if err != nil {
		return preflightFailed(err)
	}
	ph.mark("preflight")
	// N.B. the marker is in Kafka before anything is confirmed on the slot:
	// from now on a missing slot is one walrelay streamed from. Prepare has
	// read it: one that exists is refreshed once the slot moves. Written
	// while the sink starts (neither confirms anything), waited for before
	// the stream starts.
	marked := make(chan error, 1)
	if r.hist.has(st.SystemID, st.Database, r.rc.Slot) {
		marked <- nil
	} else {
		mctx, mcancel := context.WithCancel(ctx)
		defer mcancel()
		go func() { marked <- r.writeMarker(mctx, ms, st, st.ConfirmedFlush) }()
	}
	tr := checkpoint.New(st.ConfirmedFlush)
	sc := r.sc
	// N.B. the marker store checked the checkpoint topic (its topic):
	// the sink does not check it again.
	deps := sink.Deps{Tracker: tr, Metrics: r.metrics, Isolation: r.iso, CreatedTopics: r.topics, Null: r.nullSink, Tracer: r.tracing.tracer, CheckpointTopicReady: ms != nil && r.mc.Topic == sc.CheckpointTopic}
	if sc.ExactlyOnce {
		if deps.Source, err = checkpointSource(ctx, r.rc); err != nil {
			return onPostgres(err)
		}
	} else if sc.OnPoison == sink.OnPoisonPark {
		deps.Source = kafkastate.Source{Slot: r.rc.Slot, Database: st.Database, SystemID: st.SystemID}
	}
	snk, err := sink.New(sc, deps, r.log)
	if err != nil {
		return err
	}
	// N.B. on any failure the client is discarded with whatever it still
	// holds; the next attempt re-reads from the confirmed position.
	defer r.closeOrAbort("kafka client", snk.Close)
	if err := snk.Start(ctx); err != nil {
		r.kafkaAnswered.Store(0)
		return onKafka(err)
	}
	r.kafkaAnswered.Store(time.Now().UnixNano())
	ph.mark("sink")
	if err := <-marked; err != nil {
		return onKafka(err)
	}
	ph.mark("marker_write")
	r.log.Debug("start phases", ph.fields()...)
	dc := r.dc
	dc.ResolvePartitionRoots = true
	dc.Types, dc.LiveFrom, dc.Columns = checked.Types, checked.At, checked.Columns
	dec, err := decode.New(dc, r.log)
	if err != nil {
		return err
	}
	roots := pgcatalog.NewPartitionRoots(r.rc)
	defer roots.Close()
	ver := newVerifier(r.rc)
	conf := boundedConfirmer{tr, ver}
	stream := replication.New(r.rc, r.tracing.confirmer(conf, st.ConfirmedFlush), r.log)
	stream.SetWALSenderTimeout(st.WALSenderTimeout)
	// N.B. the slot read by Prepare may have been dropped and created again
	// by another walrelay's recovery since (the same name): held now, it is
	// released at once while that recovery runs.
	stream.CheckWhenHeld(pgcatalog.RecoveryCheck(r.rc.Slot))
	// N.B. before the first message: a backlog's heap grows from then on,
	// and with the start-up pages resident until the watch loop's next
	// turn the largest RSS of four bench W1 drains came in their first
	// 1.5 s every time (up to 52.3 MiB, 22.6 of it file-backed).
	stream.OnHeld(r.trimStartPages)
	stream.OnConfirmLag(r.metrics.ConfirmedAfter)
	if sc.ExactlyOnce {
		stream.ExpectTimeline(deps.Source.Timeline)
	}
	r.current.Store(&attemptState{stream: stream, tr: tr, snk: snk})
	msgs := make(chan []replication.Message, bufferBatches)
	drained := make(chan struct{})
	pipelineDone := make(chan struct{})

	g, gctx := errgroup.WithContext(ctx)
	// N.B. an abort fails the sink: a Kafka transaction's flush in
	// exactly-once mode holds the lock every Produce takes, and waits for a
	// Kafka that may not answer; failed, it gives up and nothing more is
	// confirmed.
	go func() {
		select {
		case <-r.abort:
			snk.Abort()
		case <-pipelineDone:
		}
	}()
	halt := newSchemaStop(stop, gctx.Done())
	g.Go(func() error {
		return onPostgres(stream.Run(gctx, halt.stop, st.ConfirmedFlush, msgs, drained))
	})
	g.Go(func() error {
		defer close(pipelineDone)
		return r.decodeLoop(gctx, msgs, drained, dec, roots, stream, snk, tr, ver, halt)
	})
	g.Go(func() error { return r.watch(gctx, pipelineDone, stream, snk, tr, ver) })
	g.Go(func() error { return r.keepMarker(gctx, pipelineDone, ms, st, stream) })
	g.Go(func() error { return r.keepSyncReady(gctx, pipelineDone, stream, st.Failover) })
	g.Go(func() error { return r.tracing.exportSpans(gctx, pipelineDone, conf) })
	return g.Wait()
}

// decodeLoop decodes the stream's messages and hands each transaction part
// to the sink, until msgs is closed (a graceful stop: it drains) or a stage
// fails.
func (r *Relay) decodeLoop(ctx context.Context, msgs <-chan []replication.Message, drained chan<- struct{},
	dec *decode.Decoder, roots *pgcatalog.PartitionRoots, stream *replication.Stream, snk *sink.Sink, tr *checkpoint.Tracker, ver *verifier, halt *schemaStop) error {
	var ignored, other, nonTx uint64
	for {
		select {
		case batch, ok := <-msgs:
			if !ok {
				r.metrics.SetState(metrics.StateStopping)
				if err := r.drain(ctx, snk, tr, ver, drained); err != nil || halt.err == nil {
					return err
				}
				return halt.err
			}
			var txs uint64
			for _, m := range batch {
				// N.B. after a schema change nothing more is decoded
				// (schemastop.go); the stream ends soon.
				if halt.err != nil {
					break
				}
				last, err := r.decodeOne(ctx, m, dec, roots, snk)
				if halt.halt(err) {
					break
				}
				if err != nil {
					return err
				}
				if last {
					txs++
				}
			}
			stream.Done(batch)
			// N.B. caught up with the stream: a quiet stream's records go
			// now, not after their linger.
			if len(msgs) == 0 {
				snk.Send()
			}
			// N.B. a non-transactional message comes outside any
			// transaction: counted as it is decoded (once per batch).
			if n := dec.Stats.NonTransactional; n != nonTx {
				r.metrics.MessagesNonTx.Add(float64(n - nonTx))
				nonTx = n
			}
			// N.B. counters once per batch, not per event.
			if txs > 0 {
				r.metrics.Transactions.Add(float64(txs))
				if n := dec.Stats.Ignored; n != ignored {
					r.metrics.Ignored.Add(float64(n - ignored))
					ignored = n
				}
				if n := dec.Stats.OtherTables; n != other {
					r.metrics.OtherTables.Add(float64(n - other))
					other = n
				}
			}
		case <-snk.Failed():
			return onKafka(snk.Err())
		case <-ctx.Done():
			// The replication stage failed (or the relay aborts): it
			// leaves msgs open, so stop here.
			return ctx.Err()
		}
	}
}

// decodeOne decodes one message and hands the transaction part it completes,
// if any, to the sink; last reports whether that was a transaction's end.
func (r *Relay) decodeOne(ctx context.Context, m replication.Message, dec *decode.Decoder, roots *pgcatalog.PartitionRoots, snk *sink.Sink) (last bool, err error) {
	tx, err := dec.Decode(m.Data)
	if err != nil {
		return false, fmt.Errorf("decode message at %s: %w", m.WALStart, err)
	}
	// N.B. a relation that is not an outbox may be an outbox's
	// partition: asked once per Relation message, before any
	// row of it is decoded, so that its rows are never taken
	// for another table's and confirmed past.
	for oid, _, ok := dec.Unresolved(); ok; oid, _, ok = dec.Unresolved() {
		root, exists, err := roots.Root(ctx, oid)
		if err != nil {
			return false, onPostgres(err)
		}
		if err := dec.Resolve(oid, root, exists); err != nil {
			return false, err
		}
	}
	if tx == nil {
		return false, nil
	}
	if err := snk.Produce(ctx, tx); err != nil {
		return false, onKafka(err)
	}
	if tx.Last {
		r.commits.observe(tx.EndLSN, tx.CommitTime)
	}
	return tx.Last, nil
}

// drain waits for outstanding acknowledgements after a graceful stop, then
// lets the replication stage send its final status update.
func (r *Relay) drain(ctx context.Context, snk *sink.Sink, tr *checkpoint.Tracker, ver *verifier, drained chan<- struct{}) error {
	defer close(drained)
	fctx, cancel := context.WithTimeout(ctx, r.rc.ShutdownTimeout)
	defer cancel()
	err := snk.Flush(fctx)
	if err != nil && snk.Err() != nil {
		return snk.Err()
	}
	if err != nil {
		recs, _, _ := tr.InFlight()
		r.log.Warn("shutdown timeout: unacknowledged records will be sent again on restart", zap.Int64("records", recs), zap.Error(err))
	}
	// N.B. one more publication check covering everything received, so
	// that the final status update may confirm all that Kafka acknowledged.
	if err := ver.final(fctx); errors.Is(err, replication.ErrSetup) {
		return err
	} else if err != nil {
		r.log.Warn("shutdown timeout: the publication check did not finish; transactions after it will be sent again on restart",
			zap.Stringer("lsn", ver.Verified()), zap.Error(err))
	}
	r.tracing.exported(fctx, boundedConfirmer{tr, ver})
	return nil
}
