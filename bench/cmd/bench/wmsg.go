package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/testbed"
)

// The wmsg workload: the same single-row backlog written as outbox rows
// (--source tables) and as logical decoding messages (--source messages,
// walrelay.emit's content), in one run on the same servers: WAL bytes per
// event, how fast the backlog commits, and how fast walrelay drains it to
// Kafka. Not in the default workloads: BENCH_WORKLOADS=wmsg.

// WALCompare is one source of the wmsg workload.
type WALCompare struct {
	Source       string  `json:"source"` // tables or messages
	Events       int     `json:"events"` // the backlog's, the marker's two included
	FillSeconds  float64 `json:"fill_s"`
	FillPerS     float64 `json:"fill_events_per_s"`
	WALBytes     int64   `json:"wal_bytes"`
	WALPerEvent  float64 `json:"wal_bytes_per_event"`
	DrainSeconds float64 `json:"drain_s"` // walrelay's start to the slot confirmed past the marker
	DrainPerS    float64 `json:"drain_events_per_s"`
	Records      int64   `json:"records_in_kafka"`
	Error        string  `json:"error,omitempty"`
}

// fillMessagesDDL emits one message per transaction, with the content
// walrelay.emit writes.
const fillMessagesDDL = `CREATE OR REPLACE PROCEDURE bench_fill_msg(p_type text, p_from bigint, p_to bigint, p_aggs int)
LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN p_from..p_to LOOP
    PERFORM pg_logical_emit_message(true, 'outbox', jsonb_build_object('id', gen_random_uuid(), 'aggregatetype', p_type,
      'aggregateid', 'agg-' || (i % p_aggs), 'type', 'OrderCreated', 'payload', bench_payload(i))::text);
    COMMIT;
  END LOOP;
END $$`

// runWMsg runs the wmsg workload: tables first, then messages, each on a
// slot of its own created just before its backlog.
func (b *bench) runWMsg(ctx context.Context) error {
	if err := testbed.Exec(ctx, b.dsn, fillMessagesDDL); err != nil {
		return fmt.Errorf("create bench_fill_msg: %w", err)
	}
	for _, src := range []string{"tables", "messages"} {
		if ctx.Err() != nil {
			break
		}
		c := b.walCompare(ctx, src)
		logf("wmsg %s: %d events, %.0f WAL bytes/event, committed at %.0f events/s, drained at %.0f events/s (%d records in Kafka)%s",
			src, c.Events, c.WALPerEvent, c.FillPerS, c.DrainPerS, c.Records, errSuffix(c.Error))
		b.res.WALMessages = append(b.res.WALMessages, c)
		if c.Error != "" {
			return fmt.Errorf("wmsg %s: %s", src, c.Error)
		}
	}
	return nil
}

func (b *bench) walCompare(ctx context.Context, src string) WALCompare {
	c := WALCompare{Source: src, Events: b.cfg.rows + 2}
	slot, typ := "wm_"+src, "wm"+src
	topic := topicPrefix(relayWalrelay) + typ
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topic); err != nil {
		c.Error = err.Error()
		return c
	}
	var err error
	if src == "tables" {
		_, err = rig.CreateSlot(ctx, b.dsn, slot, slot)
	} else {
		// N.B. the message source's publication lists no table.
		err = testbed.Exec(ctx, b.dsn, `CREATE PUBLICATION `+pgx.Identifier{slot}.Sanitize())
		if err == nil {
			err = testbed.Exec(ctx, b.dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
		}
	}
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer func() {
		if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slot, slot); err != nil {
			logf("%v", err)
		}
	}()

	lsn0, err := testbed.CurrentWALLSN(ctx, b.dsn)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	proc := "bench_fill"
	if src == "messages" {
		proc = "bench_fill_msg"
	}
	begin := time.Now()
	if err := b.fillRange(ctx, proc, typ); err != nil {
		c.Error = err.Error()
		return c
	}
	end, err := walMarker(ctx, b.dsn, src, typ)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.FillSeconds = round(time.Since(begin).Seconds(), 2)
	c.FillPerS = round(float64(c.Events)/c.FillSeconds, 0)
	c.WALBytes = int64(end - lsn0)
	c.WALPerEvent = round(float64(c.WALBytes)/float64(c.Events), 1)

	args := b.walrelayArgs(slot, slot, false, "")
	if src == "messages" {
		args = append(args, "--source", "messages")
	}
	p, err := rig.StartWalrelay(b.bin, filepath.Join(b.logDir("logs"), slot+"-"+time.Now().Format("150405")+".log"), args...)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	t0 := time.Now()
	defer p.Stop(45 * time.Second)
	w, err := rig.NewSlotWatcher(ctx, b.dsn)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer w.Close()
	for {
		st, err := w.State(ctx, slot)
		if err != nil {
			c.Error = err.Error()
			return c
		}
		if st.ConfirmedFlush >= end {
			break
		}
		if p.Exited() {
			c.Error = fmt.Sprintf("walrelay exited (%v):\n%s", p.Err(), p.Tail(20))
			return c
		}
		if time.Since(t0) > b.cfg.drainTimeout || ctx.Err() != nil {
			c.Error = fmt.Sprintf("slot %s confirmed %s, not yet %s: %v", slot, st.ConfirmedFlush, end, rig.ErrTimeout)
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.DrainSeconds = round(time.Since(t0).Seconds(), 3)
	c.DrainPerS = round(float64(c.Events)/c.DrainSeconds, 0)
	if c.Records, err = b.adm.EndOffsets(ctx, topic); err != nil {
		c.Error = "count records: " + err.Error()
	} else if c.Records < int64(c.Events) {
		c.Error = fmt.Sprintf("slot confirmed but %s holds %d of %d records", topic, c.Records, c.Events)
	}
	return c
}

// fillRange commits cfg.rows single-event transactions with procedure proc
// over fillConns connections.
func (b *bench) fillRange(ctx context.Context, proc, typ string) error {
	conns := b.cfg.fillConns
	per := (b.cfg.rows + conns - 1) / conns
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for i := 0; i < conns; i++ {
		from, to := i*per, min((i+1)*per, b.cfg.rows)-1
		if from > to {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- testbed.Exec(ctx, b.dsn, `CALL `+proc+`($1, $2, $3, $4)`, typ, int64(from), int64(to), b.cfg.aggregates)
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return fmt.Errorf("fill %s: %w", typ, err)
		}
	}
	return nil
}

// walMarker ends a backlog with a transaction of two events (rows or
// messages) and returns the LSN read between them, as rig.Marker.
func walMarker(ctx context.Context, dsn, src, typ string) (pglogrepl.LSN, error) {
	if src == "tables" {
		return rig.Marker(ctx, dsn, typ)
	}
	emit := `SELECT pg_logical_emit_message(true, 'outbox', jsonb_build_object('id', gen_random_uuid(), 'aggregatetype', $1::text,
		'aggregateid', 'marker', 'type', 'Marker', 'payload', bench_payload(-1))::text)`
	return rig.MarkerWith(ctx, dsn, emit, "emit marker", typ)
}

// walMessagesTable renders the wmsg workload, "" when it did not run.
func walMessagesTable(res *Results) string {
	if len(res.WALMessages) == 0 {
		return ""
	}
	s := "\n### Outbox rows vs logical decoding messages (wmsg)\n\n" +
		"| source | events (1 a transaction) | WAL bytes / event | committed events/s | walrelay drain s | drain events/s | records in Kafka |\n" +
		"|---|---:|---:|---:|---:|---:|---:|\n"
	for _, c := range res.WALMessages {
		src := c.Source
		if c.Error != "" {
			src += " (error)"
		}
		s += fmt.Sprintf("| %s | %d | %.0f | %s | %s | %s | %d |\n", src, c.Events, c.WALPerEvent, f0(c.FillPerS), f2(c.DrainSeconds), f0(c.DrainPerS), c.Records)
	}
	return s
}
