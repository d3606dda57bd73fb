package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/proc"
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
	cl, err := b.floorProducer()
	if err != nil {
		return fmt.Errorf("chain floor: %w", err)
	}
	defer cl.Close()
	var pe produceErr
	produce := func(typ, key, id, line []byte) {
		cl.Produce(ctx, &kgo.Record{
			Topic:   topicPrefix(relayChainFloor) + string(typ),
			Key:     bytes.Clone(key),
			Value:   bytes.Clone(line),
			Headers: []kgo.RecordHeader{{Key: "id", Value: bytes.Clone(id)}},
		}, pe.done)
	}
	floor, err := b.startFloorTo(ctx, slotName("w2", relayChainFloor), produce)
	if err != nil {
		return err
	}
	defer floor.stop(context.WithoutCancel(ctx), b.dsn)
	return b.floorPhases(ctx, relayChainFloor, 30_000_000, func(typ string, rate int, dur time.Duration, seq int64) Latency {
		return b.measureChain(ctx, floor, typ, rate, dur, seq, pe.failed)
	})
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
	fs0, fr0 := proc.CPUSeconds(floorSender), proc.CPUSeconds(floor.pid())
	box := b.startUsage()
	sent := b.writePhase(ctx, &l, typ, rate, dur, seq0)
	const grace = 2 * time.Minute
	deadline := time.Now().Add(grace)
	for cons.received() < sent && time.Now().Before(deadline) && ctx.Err() == nil && failed() == "" {
		time.Sleep(10 * time.Millisecond)
	}
	l.WalsenderCPUS = cpuSince(floorSender, fs0)
	l.FloorCPUS = round(l.WalsenderCPUS+cpuSince(floor.pid(), fr0), 2)
	box.end(b, &l, sent)
	if sent > 0 {
		l.WalsenderCPUSPerMEvents = round(l.WalsenderCPUS/float64(sent)*1e6, 2)
	}
	if f := failed(); f != "" && l.Error == "" {
		l.Error = f
	}
	cons.finish(&l, sent, grace)
	l.setSlotFloor(floor.stats(typ))
	return l
}
