package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// FleetDrainRound is one round of the fleet's drains: one backlog, every
// relay's slots created before it, the relays one after another (the
// order turns round each round), and their ratios.
type FleetDrainRound struct {
	Round int      `json:"round"`
	Order []string `json:"order"`
	// Ratio: walrelay's aggregate events/s over pg_recvlogical's, each
	// from its start (fork) to its end (walrelay: every slot confirmed
	// past its backlog; pg_recvlogical: every process exited at its end
	// position). RatioStreaming counts each from the moment every one of
	// its slots streams; RatioInKafka walrelay's to its last record in
	// Kafka. Before*: walrelay-before's (BENCH_WALRELAY_BEFORE), when set.
	Ratio                float64 `json:"ratio_from_start"`
	RatioStreaming       float64 `json:"ratio_from_all_streaming"`
	RatioInKafka         float64 `json:"ratio_in_kafka"`
	RatioBefore          float64 `json:"ratio_before_from_start,omitempty"`
	RatioBeforeStreaming float64 `json:"ratio_before_from_all_streaming,omitempty"`
	LoadStart            string  `json:"loadavg_at_start"`
	LoadEnd              string  `json:"loadavg_at_end"`
	// BusyShare is the share of the machine's cores busy over the round's
	// drains (1: both cores all the time).
	BusyShare float64 `json:"busy_share"`
}

// drainer is one relay of a drain round.
type drainer struct {
	label  string // the FleetDrain's Relay
	bin    string // walrelay's binary; "" for pg_recvlogical
	prefix string // of its slots
}

const fleetDrainPub = "fleetdr_pub"

// fleetDrains runs the drain rounds (BENCH_FLEET_DRAIN_ROUNDS) over dsns and
// sets the run's ratios: the medians of the rounds'.
func (b *bench) fleetDrains(ctx context.Context, dsns []string, run string) error {
	fr := b.res.Fleet
	for _, dsn := range dsns {
		if err := testbed.Exec(ctx, dsn, `CREATE PUBLICATION `+fleetDrainPub+` FOR TABLE public.outbox WITH (publish = 'insert')`); err != nil {
			return fmt.Errorf("create publication: %w", err)
		}
	}
	for r := 1; r <= b.cfg.fleetDrainRounds; r++ {
		rd, err := b.fleetDrainRound(ctx, dsns, run, r)
		if err != nil {
			return err
		}
		fr.DrainRounds = append(fr.DrainRounds, rd)
		logf("fleet: drain round %d (%v): walrelay / pg_recvlogical %.2f× from the start, %.2f× from all streaming; load %s → %s, busy %.2f",
			r, rd.Order, rd.Ratio, rd.RatioStreaming, rd.LoadStart, rd.LoadEnd, rd.BusyShare)
	}
	pick := func(f func(FleetDrainRound) float64) float64 {
		var xs []float64
		for _, rd := range fr.DrainRounds {
			xs = append(xs, f(rd))
		}
		return median(xs)
	}
	fr.DrainRatio = pick(func(rd FleetDrainRound) float64 { return rd.Ratio })
	fr.DrainRatioStreaming = pick(func(rd FleetDrainRound) float64 { return rd.RatioStreaming })
	fr.DrainRatioInKafka = pick(func(rd FleetDrainRound) float64 { return rd.RatioInKafka })
	if b.cfg.walrelayBefore != "" {
		fr.DrainRatioBefore = pick(func(rd FleetDrainRound) float64 { return rd.RatioBefore })
		fr.DrainRatioBeforeStreaming = pick(func(rd FleetDrainRound) float64 { return rd.RatioBeforeStreaming })
	}
	return nil
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return round((s[len(s)/2-1]+s[len(s)/2])/2, 2)
}

// fleetDrainRound writes a backlog of single-row transactions to each of
// dsns, seen by a slot of each relay (one publication), then drains it
// with each relay in turn: one walrelay --config (and walrelay-before's),
// and one pg_recvlogical per database.
func (b *bench) fleetDrainRound(ctx context.Context, dsns []string, run string, r int) (FleetDrainRound, error) {
	fr := b.res.Fleet
	n := len(dsns)
	ds := []drainer{{relayWalrelay + " --config", b.bin, "fldw"}}
	if b.cfg.walrelayBefore != "" {
		ds = append(ds, drainer{relayWalrelay + beforeSuffix + " --config", b.cfg.walrelayBefore, "fldb"})
	}
	ds = append(ds, drainer{relayRecv + " ×" + fmt.Sprint(n), "", "fldr"})
	if r%2 == 0 {
		slices.Reverse(ds)
	}
	rd := FleetDrainRound{Round: r}
	tag := fmt.Sprintf("%s_%d", run, r)
	slots := map[string][]string{}
	for _, d := range ds {
		rd.Order = append(rd.Order, d.label)
		for i := range dsns {
			s := fmt.Sprintf("%s%s_%03d", d.prefix, tag, i)
			if err := testbed.Exec(ctx, dsns[i], `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, s); err != nil {
				return rd, fmt.Errorf("create slot %s: %w", s, err)
			}
			slots[d.label] = append(slots[d.label], s)
		}
	}
	defer func() {
		for _, d := range ds {
			for i, s := range slots[d.label] {
				if err := rig.DropSlot(context.WithoutCancel(ctx), dsns[i], s, ""); err != nil {
					logf("fleet: %v", err)
				}
			}
		}
	}()
	typ := "drain_" + tag
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, "wrfleet."+typ); err != nil {
		return rd, err
	}
	logf("fleet: round %d: writing %d single-row transactions to each of %d databases", r, fr.Backlog, n)
	markers := make([]pglogrepl.LSN, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range dsns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if errs[i] = testbed.Exec(ctx, dsns[i], `CALL bench_fill($1, 1, $2, $3)`, typ, fr.Backlog, b.cfg.aggregates); errs[i] != nil {
				return
			}
			markers[i], errs[i] = rig.Marker(ctx, dsns[i], typ)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return rd, fmt.Errorf("fleet: write backlog: %w", err)
	}
	events := int64(n) * int64(fr.Backlog+2)
	rd.LoadStart = rig.LoadAvg()
	busy0 := rig.ReadMachineCPU()
	got := map[string]FleetDrain{}
	for _, d := range ds {
		var fd FleetDrain
		var err error
		if d.bin == "" {
			fd, err = b.fleetDrainRecv(ctx, dsns, slots[d.label], markers, events, d.label)
		} else {
			fd, err = b.fleetDrainWalrelay(ctx, dsns, slots[d.label], markers, events, d, typ, r)
		}
		if err != nil {
			return rd, err
		}
		fd.Round = r
		fr.Drains = append(fr.Drains, fd)
		got[d.prefix] = fd
		logf("fleet: round %d: %s drained %d events over %d pipelines in %.2f s: %.0f events/s (all streaming after %.2f s)%s",
			r, d.label, events, n, fd.Seconds, fd.EventsPerSec, fd.StreamingS, errSuffix(fd.Error))
	}
	rd.LoadEnd = rig.LoadAvg()
	rd.BusyShare = round(rig.BusyShare(busy0, rig.ReadMachineCPU()), 2)
	w, before, recv := got["fldw"], got["fldb"], got["fldr"]
	ratio := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return round(a/b, 2)
	}
	rd.Ratio, rd.RatioStreaming = ratio(w.EventsPerSec, recv.EventsPerSec), ratio(w.EventsPerSecStreaming, recv.EventsPerSecStreaming)
	rd.RatioInKafka = ratio(w.EventsPerSecInKafka, recv.EventsPerSec)
	if b.cfg.walrelayBefore != "" {
		rd.RatioBefore, rd.RatioBeforeStreaming = ratio(before.EventsPerSec, recv.EventsPerSec), ratio(before.EventsPerSecStreaming, recv.EventsPerSecStreaming)
	}
	return rd, nil
}

// fleetDrainWalrelay drains the slots with one walrelay --config of d's
// binary: from its start (fork) until every slot is confirmed past its
// marker.
func (b *bench) fleetDrainWalrelay(ctx context.Context, dsns, slots []string, markers []pglogrepl.LSN, events int64, d drainer, typ string, r int) (FleetDrain, error) {
	fd := FleetDrain{Relay: d.label, Pipelines: len(dsns), Events: events}
	path, _, err := b.fleetFile(dsns, slots, fmt.Sprintf("drain-%d-%s", r, d.prefix))
	if err != nil {
		return fd, err
	}
	// N.B. two walrelays of a round write the same topic: the second's
	// records are counted above the first's.
	base, err := b.adm.EndOffsets(ctx, "wrfleet."+typ)
	if err != nil {
		return fd, err
	}
	args := []string{"--config", path}
	if b.profiling && d.bin == b.bin {
		profile, _ := filepath.Abs(fmt.Sprintf("%s-fleet-drain-%d.pprof", b.base, r))
		args = append(args, "--cpu-profile", profile)
	}
	broker0 := proc.CPUSeconds(b.env.KafkaPID)
	senders := walsenderCPU(ctx, b.env.PGURL, slots)
	p, err := rig.StartWalrelay(d.bin, filepath.Join(b.logDir("logs"), fmt.Sprintf("fleet-drain-%d-%s.log", r, d.prefix)), args...)
	if err != nil {
		senders()
		return fd, err
	}
	// N.B. a walrelay that exits (a refused configuration) ends the
	// waits below at once, not after the drain's timeout.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	inKafka := make(chan float64, 1)
	go func() {
		deadline := p.Started.Add(b.cfg.drainTimeout)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			if got, err := b.adm.EndOffsets(ctx, "wrfleet."+typ); err == nil && got-base >= events {
				inKafka <- time.Since(p.Started).Seconds()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		inKafka <- 0
	}()
	fd.StreamingS = b.fleetWaitStreaming(ctx, slots, markers, p.Started)
	if err := b.fleetWaitConfirmed(ctx, slots, markers, b.cfg.drainTimeout); err != nil {
		fd.Error = err.Error()
	}
	if p.Exited() {
		senders()
		return fd, fmt.Errorf("fleet: %s exited during the drain: %v\n%s", d.label, p.Err(), p.Tail(5))
	}
	fd.Seconds = round(time.Since(p.Started).Seconds(), 2)
	fd.EventsPerSecStreaming = round(float64(events)/(fd.Seconds-fd.StreamingS), 0)
	if k := <-inKafka; k > 0 {
		fd.InKafkaS, fd.EventsPerSecInKafka = round(k, 2), round(float64(events)/k, 0)
	}
	p.Sample()
	fd.CPUS, fd.PeakRSSMiB = round(p.CPU(), 2), round(p.PeakRSSMB(), 1)
	fd.WalsenderCPUS = senders()
	if b.env.KafkaPID != 0 {
		fd.BrokerCPUS = round(proc.CPUSeconds(b.env.KafkaPID)-broker0, 2)
	}
	if err := p.Stop(60 * time.Second); err != nil {
		logf("fleet: stop: %v", err)
	}
	fd.EventsPerSec = round(float64(events)/fd.Seconds, 0)
	return fd, nil
}

// fleetDrainRecv drains the slots with one pg_recvlogical per database,
// each up to its marker (-E): from the first one's start (fork) until the
// last one exits.
func (b *bench) fleetDrainRecv(ctx context.Context, dsns, slots []string, markers []pglogrepl.LSN, events int64, label string) (FleetDrain, error) {
	fd := FleetDrain{Relay: label, Pipelines: len(dsns), Events: events}
	senders := walsenderCPU(ctx, b.env.PGURL, slots)
	t0 := time.Now()
	procs := make([]*proc.Proc, len(dsns))
	for i := range dsns {
		var err error
		if procs[i], err = rig.StartProc(relayRecv, filepath.Join(b.logDir("logs"), slots[i]+".log"), nil,
			append([]string{b.recvBin()}, recvArgs(dsns[i], slots[i], fleetDrainPub, markers[i])...)...); err != nil {
			return fd, err
		}
	}
	fd.StreamingS = b.fleetWaitStreaming(ctx, slots, markers, t0)
	var cpu float64
	for _, q := range procs {
		if !q.Wait(b.cfg.drainTimeout) {
			fd.Error = "pg_recvlogical did not reach its end position"
			_ = q.Kill()
		}
		cpu += q.CPU()
	}
	fd.Seconds = round(time.Since(t0).Seconds(), 2)
	fd.CPUS = round(cpu, 2)
	fd.WalsenderCPUS = senders()
	fd.EventsPerSec = round(float64(events)/fd.Seconds, 0)
	fd.EventsPerSecStreaming = round(float64(events)/(fd.Seconds-fd.StreamingS), 0)
	return fd, nil
}
