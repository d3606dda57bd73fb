package sink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
)

// ErrBatchRejected is wrapped when Kafka rejected a batch: the relay
// restarts from the confirmed position and the sink then isolates the
// records of the topics that rejected it (see Isolation).
var ErrBatchRejected = errors.New("kafka rejected a record batch")

// Isolation is what survives a restart after Kafka rejected a record
// batch. The broker's error names the batch, not the record, and franz-go
// fails every buffered record of the partition with it; so nothing is
// dead-lettered for it. Instead the sink fails, the relay restarts from
// the confirmed position, and the next sink produces the records of the
// topics that rejected, in the transactions up to the newest one handed to
// the client when it failed, one at a time, each acknowledged before the
// next. A rejection then is that record's own. The relay keeps one
// Isolation for all its attempts; it is safe for concurrent use.
type Isolation struct {
	mu      sync.Mutex
	through pglogrepl.LSN   // commit LSN of the newest transaction to isolate
	topics  map[string]bool // topics to isolate; nil when nothing is

	// After Kafka rejected the timestamps walrelay gave records (see
	// stamp.go): the records of stampTopics in the transactions up to
	// stampThrough are stamped with the current time. stampTries counts
	// the rejections of each topic's until the relay confirms past them.
	stampThrough pglogrepl.LSN
	stampTopics  map[string]bool
	stampTries   map[string]int
}

// stampNow stamps the records of topic in the transactions committed at
// or before through with the current time, and returns how often that
// was asked since the relay last confirmed past such a request.
func (i *Isolation) stampNow(topic string, through pglogrepl.LSN) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stampTopics == nil {
		i.stampTopics, i.stampTries = map[string]bool{}, map[string]int{}
	}
	i.stampTopics[topic] = true
	i.stampThrough = max(i.stampThrough, through)
	i.stampTries[topic]++
	return i.stampTries[topic]
}

// stamping returns which records to stamp with the current time; topics
// is nil when none.
func (i *Isolation) stamping() (through pglogrepl.LSN, topics map[string]bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stampTopics == nil {
		return 0, nil
	}
	return i.stampThrough, maps.Clone(i.stampTopics)
}

// stampsDone ends the stamping up to through once the relay confirmed
// past it, unless a rejection since extended it.
func (i *Isolation) stampsDone(through pglogrepl.LSN) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stampThrough == through {
		i.stampThrough, i.stampTopics, i.stampTries = 0, nil, nil
	}
}

// NewIsolation returns an Isolation that isolates nothing.
func NewIsolation() *Isolation { return &Isolation{} }

// add isolates topic in the transactions committed at or before through.
func (i *Isolation) add(topic string, through pglogrepl.LSN) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.topics == nil {
		i.topics = map[string]bool{}
	}
	i.topics[topic] = true
	i.through = max(i.through, through)
}

// snapshot returns what to isolate; topics is nil when nothing is.
func (i *Isolation) snapshot() (through pglogrepl.LSN, topics map[string]bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.topics == nil {
		return 0, nil
	}
	return i.through, maps.Clone(i.topics)
}

// finish ends an isolation that went through its last transaction, unless
// a rejection since extended it.
func (i *Isolation) finish(through pglogrepl.LSN) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.through == through {
		i.through, i.topics = 0, nil
	}
}

// Active reports whether records are isolated.
func (i *Isolation) Active() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.topics != nil
}

// corruptRetries is how often a lone record that the broker calls corrupt
// is sent again before it counts as the record's fault: CORRUPT_MESSAGE
// may come from a damaged request (franz-go does not retry it).
const corruptRetries = 3

// produceIsolated produces r alone and waits for the outcome. A record
// Kafka rejects is dead-lettered (or halts), unless it rejected the
// timestamp walrelay gave it (own: the event's own); any other failure
// fails the sink and the relay restarts, still isolating.
func (s *Sink) produceIsolated(ctx context.Context, tx *decode.Tx, r *kgo.Record, own bool, meta recordMeta) error {
	s.cur.Add(1)
	handed := time.Now()
	var err error
	for try := 1; ; try++ {
		if err = s.produceAndWait(ctx, r); err == nil || !errors.Is(err, kerr.CorruptMessage) || try >= corruptRetries {
			break
		}
	}
	switch {
	case err == nil:
		s.traceAcked(r, nil) // trace.go
		s.metrics.Published(r.Topic, meta.commitTime, handed)
		s.cur.Ack()
		return nil
	case errors.Is(err, errSinkDone):
		err = s.doneErr(ctx)
		s.traceAcked(r, err)
		return err
	case !rejected(err):
		s.traceAcked(r, err)
		s.metrics.Failure()
		err = fmt.Errorf("produce to topic %s partition %d: %w", r.Topic, r.Partition, err)
		s.fail(err)
		return err
	}
	// N.B. a timestamp walrelay chose is not the record's fault.
	if retry := s.timestampRetry(r, err, own); retry != nil {
		s.traceAcked(r, retry)
		s.metrics.Failure()
		s.fail(retry)
		return retry
	}
	switch {
	case s.cfg.OnPoison == OnPoisonHalt || s.delivery.haltsOnRejected() != "":
		// N.B. in exactly-once mode a record that failed leaves its Kafka
		// transaction fit only to be aborted, with this transaction's
		// earlier records in it: it halts instead of being dead-lettered.
		s.metrics.Failure()
		why := "--on-poison=halt"
		if w := s.delivery.haltsOnRejected(); w != "" {
			why = w
		}
		s.traceAcked(r, err)
		return fmt.Errorf("%w: xid %d, commit lsn %s, produce to topic %s: kafka rejected the record on its own: %w (%s: nothing from this event on is confirmed)",
			ErrPoison, tx.Xid, tx.CommitLSN, r.Topic, err, why)
	}
	s.traceDeadLettered(r, err)
	if s.parks != nil && len(r.Key) > 0 {
		return s.parkRejected(ctx, tx, r, err, meta)
	}
	dl, ferr := s.deadLetterRejected(r, err, meta)
	if ferr != nil {
		return ferr
	}
	s.log.Warn("record rejected by Kafka on its own: dead-lettered", zap.String("topic", r.Topic),
		zap.String("table", meta.table), zap.Stringer("commit_lsn", meta.commitLSN), zap.Error(err))
	s.metrics.DeadLetter(string(dl.Headers[0].Value))
	if derr := s.produceAndWait(ctx, dl); derr != nil {
		if errors.Is(derr, errSinkDone) {
			return s.doneErr(ctx)
		}
		// N.B. an event that cannot be parked is never dropped: halt.
		s.metrics.Failure()
		return fmt.Errorf("%w: dead-letter produce to %s failed: %w", ErrPoison, dl.Topic, derr)
	}
	s.cur.Ack()
	return nil
}

// errSinkDone: the wait ended because the sink failed or ctx ended.
var errSinkDone = errors.New("sink done")

// produceAndWait produces r and waits for its promise, timed by the
// watchdog like any record.
func (s *Sink) produceAndWait(ctx context.Context, r *kgo.Record) error {
	h := s.clock.open(time.Now())
	h.pending.Add(1)
	done := make(chan error, 1)
	if r.Context == nil {
		// N.B. an event's record has s.held already, or a context
		// derived from it that carries its span (Tracer.Record).
		r.Context = s.held
	}
	s.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		h.pending.Add(-1)
		done <- err
	})
	s.clock.seal(h)
	s.lingering = true
	s.sendLingering()
	select {
	case err := <-done:
		return err
	case <-s.failed:
		return errSinkDone
	case <-ctx.Done():
		return errSinkDone
	}
}

// doneErr is the error of a wait that the sink's failure or ctx ended.
func (s *Sink) doneErr(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	return ctx.Err()
}
