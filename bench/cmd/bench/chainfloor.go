package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/internal/procstat"
)

// relayChainFloor names the slot and Kafka floors in series, under the W2
// load: no relay runs.
const relayChainFloor = "chain-floor"

// chainFloor measures the least any relay can add to insert → consume on
// this box under W2's load, after walrelay's phases: the same writers at the
// same rates, a test_decoding slot read by pg_recvlogical (the slot floor),
// and each row, as soon as its line is read, produced to Kafka by a franz-go
// producer set as walrelay's (acks all, idempotent, lz4) without a linger,
// keyed by its aggregate id, its value the line (with the payload's insert
// time); the W2 consumer reads it back. Unlike the two floors measured
// apart (the Kafka floor runs alone), Kafka here shares the box with
// PostgreSQL and the writers, as under walrelay. The box carries one
// walsender less than in walrelay's phases (walrelay's own), and no relay.
func (b *bench) chainFloor(ctx context.Context) error {
	typ := func(what string) string { return w2Type(relayChainFloor, what) }
	prefix := topicPrefix(relayChainFloor)
	topics := []string{prefix + typ("warm")}
	for _, rate := range b.cfg.w2Rates {
		topics = append(topics, prefix+typ(strconv.Itoa(rate)))
	}
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topics...); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.env.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return fmt.Errorf("chain floor: client: %w", err)
	}
	defer cl.Close()
	var (
		mu      sync.Mutex
		failure error
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			failure = err
			mu.Unlock()
		}
	}
	produce := func(typ, key, id, line []byte) {
		cl.Produce(ctx, &kgo.Record{
			Topic:   prefix + string(typ),
			Key:     bytes.Clone(key),
			Value:   bytes.Clone(line),
			Headers: []kgo.RecordHeader{{Key: "id", Value: bytes.Clone(id)}},
		}, done)
	}
	failed := func() string {
		mu.Lock()
		defer mu.Unlock()
		if failure != nil {
			return "produce: " + failure.Error()
		}
		return ""
	}
	floor, err := b.startFloorTo(ctx, slotName("w2", relayChainFloor), produce)
	if err != nil {
		return err
	}
	defer floor.stop(context.WithoutCancel(ctx), b.dsn)
	logf("w2: starting %s", relayChainFloor)
	seq := int64(30_000_000)
	if b.cfg.w2Warmup > 0 && len(b.cfg.w2Rates) > 0 {
		l := b.measureChain(ctx, floor, typ("warm"), b.cfg.w2Rates[0], b.cfg.w2Warmup, seq, failed)
		seq += int64(l.Sent)
		if l.Error != "" {
			return fmt.Errorf("chain floor: warm-up: %s", l.Error)
		}
	}
	var errs []string
	for _, rate := range b.cfg.w2Rates {
		if ctx.Err() != nil {
			break
		}
		l := b.measureChain(ctx, floor, typ(strconv.Itoa(rate)), rate, b.cfg.w2Duration, seq, failed)
		seq += int64(l.Sent)
		b.res.Latency = append(b.res.Latency, l)
		if l.Error != "" {
			errs = append(errs, fmt.Sprintf("%d/s: %s", rate, l.Error))
		}
		logf("w2: %s at %d/s (achieved %.0f/s): %d records, insert→consume p50 %.2f p99 %.2f max %.1f ms; slot floor p50 %.2f; broker CPU %.1fs; busy %.2f; load %s%s",
			relayChainFloor, rate, l.AchievedRate, l.Sent, l.InsertToConsume.P50, l.InsertToConsume.P99, l.InsertToConsume.Max,
			l.SlotFloor.P50, l.BrokerCPUS, l.BusyShare, l.Load, errSuffix(l.Error))
	}
	if len(errs) > 0 {
		return fmt.Errorf("chain floor: %s", strings.Join(errs, "; "))
	}
	return nil
}

// measureChain writes typ rows at rate for dur while floor produces them
// to Kafka and the W2 consumer reads them back.
func (b *bench) measureChain(ctx context.Context, floor *floorReader, typ string, rate int, dur time.Duration, seq0 int64, failed func() string) Latency {
	l := Latency{Relay: relayChainFloor, TargetRate: rate}
	cons, err := newLatencyConsumer(ctx, b.env.Brokers, topicPrefix(relayChainFloor)+typ)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	defer cons.close()
	floorSender := b.walsenderPID(ctx, floor.slot)
	fs0, fr0 := procstat.CPUSeconds(floorSender), procstat.CPUSeconds(floor.pid())
	broker0, self0 := procstat.CPUSeconds(b.env.KafkaPID), procstat.CPUSeconds(os.Getpid())
	busy0 := rig.ReadMachineCPU()
	begin := time.Now()
	sent, err := writeAtRate(ctx, b.dsn, typ, rate, dur, b.cfg.aggregates, seq0)
	elapsed := time.Since(begin)
	l.Sent = sent
	l.Seconds = round(elapsed.Seconds(), 2)
	l.AchievedRate = round(float64(sent)/elapsed.Seconds(), 0)
	if err != nil {
		l.Error = err.Error()
	}
	const grace = 2 * time.Minute
	deadline := time.Now().Add(grace)
	for cons.received() < sent && time.Now().Before(deadline) && ctx.Err() == nil && failed() == "" {
		time.Sleep(10 * time.Millisecond)
	}
	l.WalsenderCPUS = cpuSince(floorSender, fs0)
	l.FloorCPUS = round(l.WalsenderCPUS+cpuSince(floor.pid(), fr0), 2)
	l.BrokerCPUS = cpuSince(b.env.KafkaPID, broker0)
	l.BenchCPUS = cpuSince(os.Getpid(), self0)
	l.BusyShare = round(rig.BusyShare(busy0, rig.ReadMachineCPU()), 3)
	l.Load = rig.LoadAvg()
	if sent > 0 {
		l.WalsenderCPUSPerMEvents = round(l.WalsenderCPUS/float64(sent)*1e6, 2)
		l.BrokerCPUSPerMEvents = round(l.BrokerCPUS/float64(sent)*1e6, 2)
	}
	if f := failed(); f != "" && l.Error == "" {
		l.Error = f
	}
	cons.finish(&l, sent, grace)
	fs := floor.stats(typ)
	l.SlotFloor = &fs
	if fs.P50 > 0 && fs.P99 > 0 {
		l.FloorRatioP50 = round(l.InsertToConsume.P50/fs.P50, 2)
		l.FloorRatioP99 = round(l.InsertToConsume.P99/fs.P99, 2)
	}
	return l
}
