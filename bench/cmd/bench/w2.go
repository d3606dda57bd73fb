package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// runW2 runs walrelay, then Kafka's own floor (kafkaFloor), then the slot
// and Kafka floors in series under the same load (chainFloor), then
// walrelay-before (BENCH_WALRELAY_BEFORE's binary, when the run has it),
// then Debezium, each on a fresh slot, at each rate.
func (b *bench) runW2(ctx context.Context) error {
	var errs []error
	for _, relay := range []string{relayWalrelay, relayWalrelay + beforeSuffix, relayEOS, relayDebezium} {
		if !b.cfg.has(relay) || ctx.Err() != nil {
			continue
		}
		if err := b.latencyRelay(ctx, relay); err != nil {
			errs = append(errs, fmt.Errorf("w2 %s: %w", relay, err))
		}
		if relay == relayWalrelay && ctx.Err() == nil {
			if err := b.kafkaFloor(ctx); err != nil {
				errs = append(errs, fmt.Errorf("w2: %w", err))
			}
			if err := b.chainFloor(ctx); err != nil {
				errs = append(errs, fmt.Errorf("w2: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

func w2Type(relay, what string) string {
	return "w2_" + strings.ReplaceAll(relay, "-", "_") + "_" + what
}

func (b *bench) latencyRelay(ctx context.Context, relay string) error {
	slot := slotName("w2", relay)
	if _, err := rig.CreateSlot(ctx, b.dsn, slot, slot); err != nil {
		return err
	}
	defer func() {
		if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slot, slot); err != nil {
			logf("%v", err)
		}
	}()
	prefix := topicPrefix(relay)
	topics := []string{prefix + w2Type(relay, "warm")}
	for _, rate := range b.cfg.w2Rates {
		topics = append(topics, prefix+w2Type(relay, strconv.Itoa(rate)))
	}
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topics...); err != nil {
		return err
	}
	logf("w2: starting %s", relay)
	workerDir := ""
	if relay == relayDebezium {
		workerDir = b.logDir("debezium-" + slot)
	}
	profile := ""
	if b.profiling && relay == relayWalrelay {
		// One profile over the warm-up and every rate.
		profile, _ = filepath.Abs(fmt.Sprintf("%s-w2-%s.pprof", b.base, relay))
	}
	r, err := b.startRelay(ctx, relay, slot, 0, workerDir, profile)
	if err != nil {
		return err
	}
	defer func() {
		if err := r.stop(); err != nil {
			logf("w2: stop %s: %v", relay, err)
		}
	}()
	// N.B. the slot's own floor on the same WAL at the same time: a second
	// slot, test_decoding through pg_recvlogical. Beside every relay, so
	// that each runs with the same load on the box: at 5,000/s on 2 cores
	// the floor's own reading took the share that set walrelay's tail
	// apart from Debezium's, which ran without it.
	floor, err := b.startFloor(ctx, slotName("w2", relay+"_floor"))
	if err != nil {
		return err
	}
	defer floor.stop(context.WithoutCancel(ctx), b.dsn)
	seq := int64(10_000_000)
	if b.cfg.w2Warmup > 0 && len(b.cfg.w2Rates) > 0 {
		// Unmeasured: the relay streams and is warm (JIT, connections,
		// topic metadata) before the first measured rate. Its records may
		// wait for Debezium's start-up, hence the long allowance.
		l := b.measure(ctx, r, slot, floor, w2Type(relay, "warm"), b.cfg.w2Rates[0], b.cfg.w2Warmup, seq, 3*time.Minute)
		seq += int64(l.Sent)
		if l.Error != "" {
			return fmt.Errorf("warm-up: %s", l.Error)
		}
		logf("w2: %s warm (%d events, p50 %.1f ms)", relay, l.Sent, l.InsertToConsume.P50)
	}
	var errs []error
	for _, rate := range b.cfg.w2Rates {
		if ctx.Err() != nil {
			break
		}
		r.proc.ResetPeak()
		l := b.measure(ctx, r, slot, floor, w2Type(relay, strconv.Itoa(rate)), rate, b.cfg.w2Duration, seq, 2*time.Minute)
		seq += int64(l.Sent)
		b.res.Latency = append(b.res.Latency, l)
		if l.Error != "" {
			errs = append(errs, fmt.Errorf("%d/s: %s", rate, l.Error))
		}
		floorMsg := ""
		if f := l.SlotFloor; f != nil {
			floorMsg = fmt.Sprintf("; slot floor p50 %.2f p99 %.2f ms (ratio %.2f / %.2f)", f.P50, f.P99, l.FloorRatioP50, l.FloorRatioP99)
		}
		logf("w2: %s at %d/s (achieved %.0f/s): %d events, insert→consume p50 %.1f p99 %.1f max %.1f ms%s; CPU %.1fs; load %s%s",
			relay, rate, l.AchievedRate, l.Sent, l.InsertToConsume.P50, l.InsertToConsume.P99, l.InsertToConsume.Max,
			floorMsg, l.CPUS, l.Load, errSuffix(l.Error))
	}
	return errors.Join(errs...)
}

// measure writes typ rows at rate for dur while a consumer reads the
// relay's topic, and waits up to grace after the last write for every
// record.
func (b *bench) measure(ctx context.Context, r *running, slot string, floor *floorReader, typ string, rate int, dur time.Duration, seq0 int64, grace time.Duration) Latency {
	l := Latency{Relay: r.relay, TargetRate: rate}
	topic := topicPrefix(r.relay) + typ
	cons, err := newLatencyConsumer(ctx, b.env.Brokers, topic)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	defer cons.close()
	// The box's other busy processes over the phase, each on its own.
	walsender := b.walsenderPID(ctx, slot)
	floorSender := b.walsenderPID(ctx, floor.slot)
	ws0, fs0, fr0 := proc.CPUSeconds(walsender), proc.CPUSeconds(floorSender), proc.CPUSeconds(floor.pid())
	box := b.startUsage()

	const hist, kafkaHist = "walrelay_commit_to_ack_seconds", "walrelay_kafka_ack_seconds"
	h0, k0 := scrapeHistogram(ctx, r.metrics, hist), scrapeHistogram(ctx, r.metrics, kafkaHist)
	rss := rig.SampleRSS(r.proc.Pid(), 250*time.Millisecond)
	cpu0 := r.cpu()
	sent := b.writePhase(ctx, &l, typ, rate, dur, seq0)
	deadline := time.Now().Add(grace)
	for cons.received() < sent && time.Now().Before(deadline) && ctx.Err() == nil {
		if err := r.check(ctx); err != nil {
			l.Error = err.Error()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for floor != nil && floor.count(typ) < sent && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	l.CPUS = round(r.cpu()-cpu0, 2)
	l.WalsenderCPUS = cpuSince(walsender, ws0)
	l.FloorCPUS = round(cpuSince(floorSender, fs0)+cpuSince(floor.pid(), fr0), 2)
	box.end(b, &l, sent)
	l.RelayCommitToAck = histogramDelta(h0, scrapeHistogram(ctx, r.metrics, hist))
	l.RelayKafkaAck = histogramDelta(k0, scrapeHistogram(ctx, r.metrics, kafkaHist))
	l.PeakRSSMB = round(r.proc.PeakRSSMB(), 1)
	l.RSS = rss.Stop()
	l.SteadyRSSMB = rig.SteadyMiB(l.RSS, 0)
	l.SteadyAnonMB = rig.SteadyAnonMiB(l.RSS, 0)
	if sent > 0 {
		l.CPUSPerMEvents = round(l.CPUS/float64(sent)*1e6, 2)
		l.WalsenderCPUSPerMEvents = round(l.WalsenderCPUS/float64(sent)*1e6, 2)
	}
	cons.finish(&l, sent, grace)
	if floor != nil {
		l.setSlotFloor(floor.stats(typ))
	}
	return l
}

// boxUsage is the broker's and this program's CPU seconds and the
// machine's CPU counters at the start of a phase.
type boxUsage struct {
	broker, self float64
	busy         rig.MachineCPU
}

func (b *bench) startUsage() boxUsage {
	return boxUsage{broker: proc.CPUSeconds(b.env.KafkaPID), self: proc.CPUSeconds(os.Getpid()), busy: rig.ReadMachineCPU()}
}

// end sets l's broker and bench CPU seconds since u, the machine's busy
// share and load, and the broker's CPU per million of sent.
func (u boxUsage) end(b *bench, l *Latency, sent int) {
	l.BrokerCPUS = cpuSince(b.env.KafkaPID, u.broker)
	l.BenchCPUS = cpuSince(os.Getpid(), u.self)
	l.BusyShare = round(rig.BusyShare(u.busy, rig.ReadMachineCPU()), 3)
	l.Load = rig.LoadAvg()
	if sent > 0 {
		l.BrokerCPUSPerMEvents = round(l.BrokerCPUS/float64(sent)*1e6, 2)
	}
}

// setSlotFloor sets l's slot floor and l's ratios to it.
func (l *Latency) setSlotFloor(fs Stats) {
	l.SlotFloor = &fs
	if fs.P50 > 0 && fs.P99 > 0 {
		l.FloorRatioP50 = round(l.InsertToConsume.P50/fs.P50, 2)
		l.FloorRatioP99 = round(l.InsertToConsume.P99/fs.P99, 2)
	}
}

// writePhase writes typ rows at rate for dur (writeAtRate) and sets l's
// rows sent, seconds, achieved rate and error; it returns the rows sent.
func (b *bench) writePhase(ctx context.Context, l *Latency, typ string, rate int, dur time.Duration, seq0 int64) int {
	begin := time.Now()
	sent, err := writeAtRate(ctx, b.dsn, typ, rate, dur, b.cfg.aggregates, seq0)
	elapsed := time.Since(begin)
	l.Sent = sent
	l.Seconds = round(elapsed.Seconds(), 2)
	l.AchievedRate = round(float64(sent)/elapsed.Seconds(), 0)
	if err != nil {
		l.Error = err.Error()
	}
	return sent
}

// walsenderPID is the server process streaming slot, 0 if none.
func (b *bench) walsenderPID(ctx context.Context, slot string) int {
	w, err := rig.NewSlotWatcher(ctx, b.dsn)
	if err != nil {
		return 0
	}
	defer w.Close()
	st, err := w.State(ctx, slot)
	if err != nil {
		return 0
	}
	return st.ActivePID
}

// cpuSince is pid's CPU seconds since c0 (0 when either is unknown).
func cpuSince(pid int, c0 float64) float64 {
	if pid == 0 || c0 < 0 {
		return 0
	}
	c := proc.CPUSeconds(pid)
	if c < 0 {
		return 0
	}
	return round(c-c0, 2)
}

// writeAtRate commits single-row transactions at rate for dur: row i is due
// at begin + i/rate, written by connection i mod k. A connection that falls
// behind writes at once (the achieved rate says so); latency is measured
// from each row's own insert time, not from when it was due.
func writeAtRate(ctx context.Context, dsn, typ string, rate int, dur time.Duration, aggs int, seq0 int64) (int, error) {
	total := int(float64(rate) * dur.Seconds())
	k := min(max(rate/1000+1, 2), 8)
	interval := float64(time.Second) / float64(rate)
	ctx, cancel := context.WithTimeout(ctx, dur+2*time.Minute)
	defer cancel()
	var conns []*pgx.Conn
	defer func() {
		for _, c := range conns {
			c.Close(context.Background())
		}
	}()
	const ins = `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), $1, $2, 'OrderCreated', bench_payload($3))`
	for i := 0; i < k; i++ {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
		if _, err := c.Prepare(ctx, "ins", ins); err != nil {
			return 0, err
		}
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, k)
	begin := time.Now().Add(20 * time.Millisecond)
	for w := 0; w < k; w++ {
		wg.Add(1)
		go func(w int, c *pgx.Conn) {
			defer wg.Done()
			for i := w; i < total; i += k {
				due := begin.Add(time.Duration(float64(i) * interval))
				if time.Since(begin) > dur {
					// N.B. a rate above the box's insert rate measures at
					// that maximum for dur, not until every row is written.
					return
				}
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				seq := seq0 + int64(i)
				if _, err := c.Exec(ctx, "ins", typ, "agg-"+strconv.FormatInt(seq%int64(aggs), 10), seq); err != nil {
					errc <- fmt.Errorf("write: %w", err)
					return
				}
				sent.Add(1)
			}
		}(w, conns[w])
	}
	wg.Wait()
	close(errc)
	return int(sent.Load()), <-errc
}

// latencyConsumer reads one topic and notes, per new record id, receive
// time minus the payload's insert time and minus the record timestamp.
type latencyConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	seen      map[string]struct{}
	insertLat []float64 // ms
	recordLat []float64 // ms
	dups      int
	err       error
	once      sync.Once
}

func newLatencyConsumer(ctx context.Context, brokers []string, topic string) (*latencyConsumer, error) {
	// N.B. read_committed, as a consumer of walrelay --exactly-once must
	// read: a non-transactional producer's records are seen as soon.
	cl, err := testbed.NewReader(brokers, true, kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	// One empty poll: metadata and start offsets are loaded before the
	// first row is written, so no record waits for the consumer to start.
	pctx, pcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	fs := cl.PollFetches(pctx)
	pcancel()
	c := &latencyConsumer{cl: cl, done: make(chan struct{}), seen: map[string]struct{}{}}
	c.add(fs, time.Now())
	ctx, c.cancel = context.WithCancel(ctx)
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			c.add(fs, time.Now())
		}
	}()
	return c, nil
}

func (c *latencyConsumer) add(fs kgo.Fetches, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && c.err == nil {
			c.err = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
		}
	})
	nowUS := now.UnixMicro()
	fs.EachRecord(func(r *kgo.Record) {
		if r.Attrs.IsControl() { // a transaction marker
			return
		}
		var id string
		for _, h := range r.Headers {
			if h.Key == "id" {
				id = string(h.Value)
			}
		}
		if _, ok := c.seen[id]; ok {
			c.dups++
			return
		}
		c.seen[id] = struct{}{}
		if ts, ok := payloadTS(r.Value); ok {
			c.insertLat = append(c.insertLat, float64(nowUS-ts)/1000)
		}
		c.recordLat = append(c.recordLat, float64(nowUS-r.Timestamp.UnixMicro())/1000)
	})
}

// finish closes the consumer and sets l's records received, duplicates
// and latencies, and its error if it has none yet: the consumer's, or
// fewer records than sent within grace of the last write.
func (c *latencyConsumer) finish(l *Latency, sent int, grace time.Duration) {
	c.close()
	l.Received, l.Duplicates = c.received(), c.dups
	l.InsertToConsume = stats(c.insertLat)
	l.RecordTSToConsume = stats(c.recordLat)
	if c.err != nil && l.Error == "" {
		l.Error = c.err.Error()
	}
	if l.Received < sent && l.Error == "" {
		l.Error = fmt.Sprintf("received %d of %d records within %s of the last write", l.Received, sent, grace)
	}
}

func (c *latencyConsumer) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *latencyConsumer) close() {
	c.once.Do(func() {
		if c.cancel != nil {
			c.cancel()
			<-c.done
		}
		c.cl.Close()
	})
}

var tsKey = []byte(`"ts": `)

// payloadTS reads "ts" (microseconds) from the payload as PostgreSQL renders
// jsonb: `{"ts": 1712345678901234, ...}`.
func payloadTS(v []byte) (int64, bool) {
	i := bytes.Index(v, tsKey)
	if i < 0 {
		return 0, false
	}
	var n int64
	j := i + len(tsKey)
	start := j
	for ; j < len(v) && v[j] >= '0' && v[j] <= '9'; j++ {
		n = n*10 + int64(v[j]-'0')
	}
	return n, j > start
}

func stats(xs []float64) Stats {
	s := Stats{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	sort.Float64s(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	q := func(p float64) float64 {
		i := int(p*float64(len(xs)-1) + 0.5)
		return round(xs[i], 2)
	}
	s.Mean = round(sum/float64(len(xs)), 2)
	s.P50, s.P90, s.P99, s.P999 = q(0.50), q(0.90), q(0.99), q(0.999)
	s.Max = round(xs[len(xs)-1], 2)
	return s
}
