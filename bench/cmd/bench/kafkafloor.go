package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// relayKafkaFloor names Kafka's own floor in W2's results: no PostgreSQL
// and no relay, a producer writing straight to a topic.
const relayKafkaFloor = "kafka-floor"

// kafkaFloor measures Kafka's own share of a relay's latency, after
// walrelay's W2 phases and alone on the box: a franz-go producer set as
// walrelay's (acks from all in-sync replicas, idempotent, lz4) but without
// a linger writes records of the W2 payload's size at each W2 rate, keyed
// over the same aggregates, each stamped with the time it is produced, and
// the W2 consumer reads them back. Produce → consume is what Kafka adds to
// any relay's commit → consume; the slot floor is what PostgreSQL adds.
func (b *bench) kafkaFloor(ctx context.Context) error {
	cl, err := b.floorProducer()
	if err != nil {
		return fmt.Errorf("kafka floor: %w", err)
	}
	defer cl.Close()
	return b.floorPhases(ctx, relayKafkaFloor, 20_000_000, func(typ string, rate int, dur time.Duration, seq int64) Latency {
		return b.measureKafka(ctx, cl, topicPrefix(relayKafkaFloor)+typ, rate, dur, seq)
	})
}

// floorProducer is the floors' producer: set as walrelay's (acks from all
// in-sync replicas, idempotent, lz4, keys hashed as Kafka's Java client
// does) but without a linger.
func (b *bench) floorProducer() (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.env.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// floorPhases creates floor's topics (topicPrefix, its W2 types) and
// runs measure for the warm-up (unmeasured) and at each W2 rate, its
// record ids counting from seq, keeping each rate's figures.
func (b *bench) floorPhases(ctx context.Context, floor string, seq int64, measure func(typ string, rate int, dur time.Duration, seq int64) Latency) error {
	typ := func(what string) string { return w2Type(floor, what) }
	topics := []string{topicPrefix(floor) + typ("warm")}
	for _, rate := range b.cfg.w2Rates {
		topics = append(topics, topicPrefix(floor)+typ(strconv.Itoa(rate)))
	}
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topics...); err != nil {
		return err
	}
	logf("w2: starting %s", floor)
	if b.cfg.w2Warmup > 0 && len(b.cfg.w2Rates) > 0 {
		l := measure(typ("warm"), b.cfg.w2Rates[0], b.cfg.w2Warmup, seq)
		seq += int64(l.Sent)
		if l.Error != "" {
			return fmt.Errorf("%s: warm-up: %s", floor, l.Error)
		}
	}
	var errs []string
	for _, rate := range b.cfg.w2Rates {
		if ctx.Err() != nil {
			break
		}
		l := measure(typ(strconv.Itoa(rate)), rate, b.cfg.w2Duration, seq)
		seq += int64(l.Sent)
		b.res.Latency = append(b.res.Latency, l)
		if l.Error != "" {
			errs = append(errs, fmt.Sprintf("%d/s: %s", rate, l.Error))
		}
		slot := ""
		if l.SlotFloor != nil {
			slot = fmt.Sprintf("; slot floor p50 %.2f", l.SlotFloor.P50)
		}
		logf("w2: %s at %d/s (achieved %.0f/s): %d records, to consume p50 %.2f p99 %.2f max %.1f ms%s; broker CPU %.1fs; busy %.2f; load %s%s",
			floor, rate, l.AchievedRate, l.Sent, l.InsertToConsume.P50, l.InsertToConsume.P99, l.InsertToConsume.Max,
			slot, l.BrokerCPUS, l.BusyShare, l.Load, errSuffix(l.Error))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %s", floor, strings.Join(errs, "; "))
	}
	return nil
}

// produceErr keeps the last error of a floor's produced records.
type produceErr struct {
	mu  sync.Mutex
	err error
}

// done is the records' promise.
func (p *produceErr) done(_ *kgo.Record, err error) {
	if err != nil {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
	}
}

// failed is "produce: " and the error, "" if none.
func (p *produceErr) failed() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return "produce: " + p.err.Error()
	}
	return ""
}

// measureKafka produces to topic at rate for dur and reads it back.
func (b *bench) measureKafka(ctx context.Context, cl *kgo.Client, topic string, rate int, dur time.Duration, seq0 int64) Latency {
	l := Latency{Relay: relayKafkaFloor, TargetRate: rate}
	cons, err := newLatencyConsumer(ctx, b.env.Brokers, topic)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	defer cons.close()
	// N.B. the W1 rows' average size when W1 ran, else theirs as measured
	// (bench_payload renders about 310 bytes).
	size := b.res.Config.PayloadBytes
	if size == 0 {
		size = 310
	}
	pad := strings.Repeat("x", max(0, int(size)-60))
	box := b.startUsage()
	var pe produceErr
	total := int(float64(rate) * dur.Seconds())
	interval := float64(time.Second) / float64(rate)
	begin := time.Now()
	sent := 0
	for i := 0; i < total && ctx.Err() == nil; i++ {
		if d := time.Until(begin.Add(time.Duration(float64(i) * interval))); d > 0 {
			time.Sleep(d)
		}
		seq := seq0 + int64(i)
		// N.B. the payload's "ts" as the W2 rows carry it (payloadTS):
		// microseconds, here when the record is handed to the client.
		v := fmt.Sprintf(`{"ts": %d, "seq": %d, "note": "%s"}`, time.Now().UnixMicro(), seq, pad)
		cl.Produce(ctx, &kgo.Record{
			Topic:   topic,
			Key:     []byte("agg-" + strconv.FormatInt(seq%int64(b.cfg.aggregates), 10)),
			Value:   []byte(v),
			Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(strconv.FormatInt(seq, 10))}},
		}, pe.done)
		sent++
	}
	elapsed := time.Since(begin)
	if err := cl.Flush(ctx); err != nil && l.Error == "" {
		l.Error = err.Error()
	}
	l.Sent = sent
	l.Seconds = round(elapsed.Seconds(), 2)
	l.AchievedRate = round(float64(sent)/elapsed.Seconds(), 0)
	const grace = time.Minute
	deadline := time.Now().Add(grace)
	for cons.received() < sent && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	box.end(b, &l, sent)
	if f := pe.failed(); f != "" && l.Error == "" {
		l.Error = f
	}
	cons.finish(&l, sent, grace)
	return l
}
