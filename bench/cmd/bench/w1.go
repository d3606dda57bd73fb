package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// runW1 creates every relay's slot, then for each backlog commits it while
// no relay runs and lets each relay drain it in turn.
func (b *bench) runW1(ctx context.Context) error {
	for _, r := range b.cfg.relays {
		if _, err := rig.CreateSlot(ctx, b.dsn, slotName("w1", r), slotName("w1", r)); err != nil {
			return err
		}
	}
	defer func() {
		for _, r := range b.cfg.relays {
			if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slotName("w1", r), slotName("w1", r)); err != nil {
				logf("%v", err)
			}
		}
	}()
	// N.B. the first relay to produce would otherwise pay for the broker's
	// JIT warming up (the stock JVM): 200,000 records of the payload's size
	// first, unmeasured.
	t0 := time.Now()
	if err := b.adm.WarmUp(ctx, b.env.Brokers, "bench.warmup", int32(b.cfg.partitions), 200000, 310); err != nil {
		return err
	}
	logf("broker warmed up in %.1fs (200000 records)", time.Since(t0).Seconds())
	var errs []error
	for _, wl := range []string{"w1", "w1batch"} {
		if !b.cfg.runs(wl) || ctx.Err() != nil {
			continue
		}
		var topics, fresh []string
		for _, r := range b.cfg.relays {
			if r == relayNew {
				// N.B. walrelay creates this one, when its first record comes.
				fresh = append(fresh, topicPrefix(r)+wl)
			}
			if r == relayWalrelay || r == relayWalrelay+beforeSuffix || r == relayEOS || r == relayDebezium {
				topics = append(topics, topicPrefix(r)+wl)
			}
		}
		if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topics...); err != nil {
			return err
		}
		if err := b.adm.DeleteTopics(ctx, fresh...); err != nil {
			return err
		}
		fill, err := b.fill(ctx, wl)
		if err != nil {
			return err
		}
		b.res.Fills = append(b.res.Fills, fill)
		endpos, _ := pglogrepl.ParseLSN(fill.EndLSN)
		for _, r := range b.cfg.relays {
			if ctx.Err() != nil {
				break
			}
			d := b.drain(ctx, wl, r, endpos, fill.Rows)
			b.res.Drains = append(b.res.Drains, d)
			if d.Error != "" {
				errs = append(errs, fmt.Errorf("%s %s: %s", wl, r, d.Error))
			}
		}
	}
	return errors.Join(errs...)
}

// fill commits a backlog: w1 as single-row transactions over fillConns
// connections (a procedure that commits after each row), w1batch as
// batchTx transactions of batchRows rows; then the marker transaction.
func (b *bench) fill(ctx context.Context, wl string) (Fill, error) {
	f := Fill{Workload: wl}
	lsn0, err := testbed.CurrentWALLSN(ctx, b.dsn)
	if err != nil {
		return f, err
	}
	type job struct {
		sql  string
		args []any
	}
	var jobs [][]job // per connection
	conns := b.cfg.fillConns
	switch wl {
	case "w1":
		f.Transactions, f.Rows = b.cfg.rows, b.cfg.rows
		per := (b.cfg.rows + conns - 1) / conns
		for c := 0; c < conns; c++ {
			from, to := c*per, min((c+1)*per, b.cfg.rows)-1
			if from > to {
				continue
			}
			jobs = append(jobs, []job{{`CALL bench_fill($1, $2, $3, $4)`, []any{wl, int64(from), int64(to), b.cfg.aggregates}}})
		}
	case "w1batch":
		f.Transactions, f.Rows = b.cfg.batchTx, b.cfg.batchTx*b.cfg.batchRows
		jobs = make([][]job, min(conns, b.cfg.batchTx))
		for t := 0; t < b.cfg.batchTx; t++ {
			from := int64(t) * int64(b.cfg.batchRows)
			jobs[t%len(jobs)] = append(jobs[t%len(jobs)], job{
				`INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
				 SELECT gen_random_uuid(), $1, 'agg-' || (i % $4), 'OrderCreated', bench_payload(i)
				 FROM generate_series($2::bigint, $3::bigint) i`,
				[]any{wl, from, from + int64(b.cfg.batchRows) - 1, b.cfg.aggregates}})
		}
	}
	logf("%s: committing %d rows in %d transactions over %d connections", wl, f.Rows, f.Transactions, len(jobs))
	fctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	begin := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, len(jobs))
	for _, js := range jobs {
		wg.Add(1)
		go func(js []job) {
			defer wg.Done()
			conn, err := pgx.Connect(fctx, b.dsn)
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close(context.WithoutCancel(fctx))
			for _, j := range js {
				if _, err := conn.Exec(fctx, j.sql, j.args...); err != nil {
					errc <- fmt.Errorf("fill %s: %w", wl, err)
					return
				}
			}
		}(js)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		return f, err
	}
	end, err := rig.Marker(ctx, b.dsn, wl)
	if err != nil {
		return f, err
	}
	f.Seconds = round(time.Since(begin).Seconds(), 2)
	f.RowsPerS = round(float64(f.Rows)/time.Since(begin).Seconds(), 0)
	f.Rows += 2 // the marker's
	f.Transactions++
	f.EndLSN = end.String()
	if b.res.Config.PayloadBytes == 0 {
		if err := b.payloadSize(ctx); err != nil {
			return f, err
		}
	}
	f.WALBytes = int64(end - lsn0)
	logf("%s: %d rows committed in %.1fs (%.0f rows/s, %d MiB of WAL); marker at %s", wl, f.Rows, f.Seconds, f.RowsPerS, f.WALBytes>>20, end)
	return f, nil
}

// drain starts relay on its W1 slot and waits until the slot is confirmed
// past endpos.
func (b *bench) drain(ctx context.Context, wl, relay string, endpos pglogrepl.LSN, events int) Drain {
	d := Drain{Workload: wl, Relay: relay, Events: events}
	slot := slotName("w1", relay)
	w, err := rig.NewSlotWatcher(ctx, b.dsn)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	defer w.Close()
	profile := ""
	if b.profiling && (strings.HasPrefix(relay, relayWalrelay) && relay != relayEOS) {
		profile, _ = filepath.Abs(fmt.Sprintf("%s-%s-%s.pprof", b.base, wl, relay))
		d.Profile = filepath.Base(profile)
	}
	kafka := relay == relayWalrelay || relay == relayWalrelay+beforeSuffix || relay == relayEOS || relay == relayNew || relay == relayDebezium
	topic := topicPrefix(relay) + wl

	d.LoadBefore = rig.LoadAvg()
	busy0 := rig.ReadMachineCPU()
	broker0 := proc.CPUSeconds(b.env.KafkaPID)
	self0 := proc.CPUSeconds(os.Getpid())
	logf("%s: %s draining %d events", wl, relay, events)
	workerDir := ""
	if relay == relayDebezium {
		workerDir = b.logDir("debezium-" + slot)
	}
	r, err := b.startRelay(ctx, relay, slot, endpos, workerDir, profile)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	rss := rig.SampleRSS(r.proc.Pid(), 250*time.Millisecond)
	if r.worker != nil {
		d.WorkerStartS = round(r.worker.Ready.Seconds(), 2)
		d.WorkerStartCPU = round(r.worker.ReadyCPU, 2)
	}
	deadline := r.t0.Add(b.cfg.drainTimeout)
	var walsenderCPU float64
	nextOffsets := time.Now()
	for {
		now := time.Now()
		st, err := w.State(ctx, slot)
		if err != nil {
			d.Error = err.Error()
			break
		}
		if st.ActivePID != 0 {
			if c := proc.CPUSeconds(st.ActivePID); c >= 0 {
				walsenderCPU = c
			}
		}
		if !now.Before(nextOffsets) {
			if kafka && d.RecordsS == 0 {
				if n, err := b.adm.EndOffsets(ctx, topic); err == nil && n >= int64(events) {
					d.RecordsS = round(time.Since(r.t0).Seconds(), 3)
					d.RecordsPerS = round(float64(events)/d.RecordsS, 0)
				}
			}
			if v, ok := scrapeGauge(ctx, r.metrics, "walrelay_inflight_bytes"); ok {
				d.Inflight = append(d.Inflight, InflightPoint{T: round(time.Since(r.t0).Seconds(), 3), MiB: round(v/(1<<20), 2)})
			}
			nextOffsets = now.Add(250 * time.Millisecond)
		}
		if st.ConfirmedFlush >= endpos {
			d.ConfirmedS = round(time.Since(r.t0).Seconds(), 3)
			break
		}
		if err := r.check(ctx); err != nil {
			d.Error = err.Error()
			break
		}
		if now.After(deadline) || ctx.Err() != nil {
			d.Error = fmt.Sprintf("slot %s confirmed %s, not yet %s, after %s: %v", slot, st.ConfirmedFlush, endpos, time.Since(r.t0).Round(time.Second), rig.ErrTimeout)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.CPUS = round(r.cpu(), 2)
	d.PeakRSSMB = round(r.proc.PeakRSSMB(), 1)
	d.RSS = rss.Stop()
	d.SteadyRSSMB = rig.SteadyMiB(d.RSS, 1)
	d.SteadyAnonMB = rig.SteadyAnonMiB(d.RSS, 1)
	d.InflightMedianMiB, d.InflightPeakMiB = inflightFigures(d.Inflight)
	d.WalsenderCPUS = round(walsenderCPU, 2)
	if b.env.KafkaPID != 0 {
		d.BrokerCPUS = round(proc.CPUSeconds(b.env.KafkaPID)-broker0, 2)
	}
	busy1 := rig.ReadMachineCPU()
	d.BusyShare = round(rig.BusyShare(busy0, busy1), 3)
	d.OtherCPUS = round(max(0, rig.BusySeconds(busy0, busy1)-d.CPUS-d.WalsenderCPUS-d.BrokerCPUS-(proc.CPUSeconds(os.Getpid())-self0)), 1)
	d.LoadAfter = rig.LoadAvg()
	if err := r.stop(); err != nil && d.Error == "" {
		d.Error = "stop: " + err.Error()
	}
	if d.ConfirmedS > 0 {
		d.RelayCPUShare = round(d.CPUS/d.ConfirmedS, 2)
		d.EventsPerS = round(float64(events)/d.ConfirmedS, 0)
		d.CPUSPerMEvents = round(d.CPUS/float64(events)*1e6, 2)
	}
	if kafka {
		n, err := b.adm.EndOffsets(ctx, topic)
		d.RecordsInKafka = n
		if err != nil && d.Error == "" {
			d.Error = "count records: " + err.Error()
		} else if n < int64(events) && d.Error == "" {
			d.Error = fmt.Sprintf("slot confirmed but %s holds %d of %d records", topic, n, events)
		}
	}
	recs := ""
	if kafka && d.RecordsS > 0 {
		recs = fmt.Sprintf(", every record in Kafka after %.2fs", d.RecordsS)
	}
	logf("%s: %s: confirmed after %.2fs (%.0f events/s)%s, CPU %.1fs (walsender %.1fs, broker %.1fs), peak RSS %.0f MiB, median RSS after 1 s %.1f MiB (%.1f anonymous); load %s%s",
		wl, relay, d.ConfirmedS, d.EventsPerS, recs, d.CPUS, d.WalsenderCPUS, d.BrokerCPUS, d.PeakRSSMB, d.SteadyRSSMB, d.SteadyAnonMB, d.LoadAfter, errSuffix(d.Error))
	return d
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "; ERROR: " + s
}

// inflightFigures are the median and the peak of walrelay's in-flight bytes
// in MiB; zero without samples.
func inflightFigures(pts []InflightPoint) (median, peak float64) {
	if len(pts) == 0 {
		return 0, 0
	}
	v := make([]float64, len(pts))
	for i, p := range pts {
		v[i] = p.MiB
		peak = max(peak, p.MiB)
	}
	slices.Sort(v)
	return v[len(v)/2], peak
}
