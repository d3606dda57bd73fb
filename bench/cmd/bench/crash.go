package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/proc"
)

// connectOffsetFlush is Kafka Connect's default offset.flush.interval.ms:
// how often a Connect worker commits Debezium's offsets and so confirms
// its slot, the window a crash of Debezium sends again.
const connectOffsetFlush = 60 * time.Second

// Crash is one relay under the crash workload: a steady stream of
// single-row transactions, the relay killed with SIGKILL every Every
// seconds of streaming and started again at once, at its DEFAULT settings
// (walrelay without --status-interval; Debezium with Connect's default
// offset flush and no heartbeat).
type Crash struct {
	Relay        string  `json:"relay"`
	TargetRate   int     `json:"target_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	Every        float64 `json:"kill_every_s"`
	Kills        int     `json:"kills"`
	Sent         int     `json:"sent"`
	Received     int     `json:"received"`
	Lost         int     `json:"lost"`
	Duplicates   int     `json:"duplicates"`
	// PerCrashEvents and PerCrashSeconds: duplicates per kill, in events
	// and in seconds of traffic at the achieved rate.
	PerCrashEvents  float64 `json:"duplicates_per_crash"`
	PerCrashSeconds float64 `json:"duplicates_per_crash_s"`
	// RestartS is each restart's time from the kill until the slot was
	// streamed again.
	RestartS []float64 `json:"restart_to_streaming_s"`
	Settings string    `json:"settings"`
	Error    string    `json:"error,omitempty"`
}

// runCrash runs the crash workload for walrelay, walrelay-before
// (BENCH_WALRELAY_BEFORE's binary) and Debezium, whichever of them the run
// has, one after the other.
func (b *bench) runCrash(ctx context.Context) error {
	var errs []error
	for _, relay := range []string{relayWalrelay, relayWalrelay + beforeSuffix, relayDebezium} {
		if !b.cfg.has(relay) || ctx.Err() != nil {
			continue
		}
		c := b.crashRelay(ctx, relay)
		b.res.Crashes = append(b.res.Crashes, c)
		logf("crash: %s: %d kills every %.0f s at %.0f/s: %d sent, %d received, lost %d, %d duplicates = %.0f per crash = %.2f s of traffic%s",
			relay, c.Kills, c.Every, c.AchievedRate, c.Sent, c.Received, c.Lost, c.Duplicates, c.PerCrashEvents, c.PerCrashSeconds, errSuffix(c.Error))
		if c.Error != "" {
			errs = append(errs, fmt.Errorf("crash %s: %s", relay, c.Error))
		}
	}
	return errors.Join(errs...)
}

func (b *bench) crashRelay(ctx context.Context, relay string) Crash {
	c := Crash{Relay: relay, TargetRate: b.cfg.crashRate, Every: b.cfg.crashEvery.Seconds()}
	if err := b.crashRun(ctx, &c); err != nil {
		c.Error = err.Error()
	}
	if c.Kills > 0 {
		c.PerCrashEvents = round(float64(c.Duplicates)/float64(c.Kills), 1)
		if c.AchievedRate > 0 {
			c.PerCrashSeconds = round(c.PerCrashEvents/c.AchievedRate, 3)
		}
	}
	return c
}

func (b *bench) crashRun(ctx context.Context, c *Crash) error {
	// N.B. names of this run only (a kept bed: walrelay's marker store
	// refuses a slot of a name it streamed, made anew).
	run := time.Now().Format("150405")
	slot := slotName("crash_"+run, c.Relay)
	if _, err := rig.CreateSlot(ctx, b.dsn, slot, slot); err != nil {
		return err
	}
	defer func() {
		if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slot, slot); err != nil {
			logf("%v", err)
		}
	}()
	typ := "crash_" + run + "_" + strings.ReplaceAll(c.Relay, "-", "_")
	topic := topicPrefix(c.Relay) + typ
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topic); err != nil {
		return err
	}
	cons, err := newLatencyConsumer(ctx, b.env.Brokers, topic)
	if err != nil {
		return err
	}
	defer cons.close()

	start := func() (*running, error) { return b.startCrashRelay(ctx, c, slot) }
	r, err := start()
	if err != nil {
		return err
	}
	defer func() {
		if r != nil {
			if err := r.stop(); err != nil {
				logf("crash: stop %s: %v", c.Relay, err)
			}
		}
	}()
	if _, err := b.waitStreaming(ctx, slot, r); err != nil {
		return err
	}
	w := startSteadyWriter(ctx, b.dsn, typ, b.cfg.crashRate, b.cfg.aggregates)
	for i := 0; i < b.cfg.crashKills; i++ {
		if err := sleepCheck(ctx, r, b.cfg.crashEvery); err != nil {
			w.stop()
			return err
		}
		killed := time.Now()
		if err := r.proc.Kill(); err != nil {
			w.stop()
			return fmt.Errorf("kill -9 %s: %w", c.Relay, err)
		}
		c.Kills++
		r = nil
		// The walsender of the killed relay goes once PostgreSQL sees the
		// socket closed; a new one could not take the slot before.
		if err := b.waitSlotFree(ctx, slot); err != nil {
			w.stop()
			return err
		}
		if r, err = start(); err != nil {
			w.stop()
			return err
		}
		if _, err := b.waitStreaming(ctx, slot, r); err != nil {
			w.stop()
			return err
		}
		c.RestartS = append(c.RestartS, round(time.Since(killed).Seconds(), 2))
	}
	err = sleepCheck(ctx, r, b.cfg.crashEvery)
	sent, secs, werr := w.stop()
	c.Sent = sent
	if secs > 0 {
		c.AchievedRate = round(float64(sent)/secs, 0)
	}
	if err = errors.Join(err, werr); err != nil {
		return err
	}
	// Every record, however late: lost is what never came.
	deadline := time.Now().Add(3 * time.Minute)
	for cons.received() < sent && time.Now().Before(deadline) && ctx.Err() == nil {
		if err := r.check(ctx); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	cons.close()
	c.Received, c.Duplicates = cons.received(), cons.dups
	c.Lost = max(sent-c.Received, 0)
	if c.Lost > 0 {
		return fmt.Errorf("%d of %d records never reached Kafka within 3 minutes of the last write", c.Lost, sent)
	}
	return cons.err
}

// startCrashRelay starts c.Relay on slot at its defaults.
func (b *bench) startCrashRelay(ctx context.Context, c *Crash, slot string) (*running, error) {
	r := &running{relay: c.Relay}
	typTopic := topicPrefix(c.Relay) + "${aggregatetype}"
	if c.Relay == relayDebezium {
		dir := b.logDir("debezium-" + slot) // kept across restarts: the offsets file
		// N.B. Connect's and Debezium's defaults for what decides the
		// window: offset.flush.interval.ms 60000, no heartbeat.
		props := rig.DebeziumWorkerProps(connectOffsetFlush, 1048588)
		conf, err := rig.DebeziumConnector(b.dsn, slot, slot, topicPrefix(c.Relay)+"${routedByValue}", 0)
		if err != nil {
			return nil, err
		}
		conf["extended.headers.enabled"] = "false"
		c.Settings = "offset.flush.interval.ms=" + props["offset.flush.interval.ms"] + ", heartbeat.interval.ms=0 (defaults)"
		if r.worker, err = rig.StartConnect(ctx, b.libs, dir, b.env.Brokers, props); err != nil {
			return nil, err
		}
		r.proc = r.worker.Proc
		r.connector = slot
		if err := r.worker.CreateConnector(ctx, slot, conf); err != nil {
			_ = r.stop()
			return nil, err
		}
		return r, nil
	}
	args := []string{
		"--pg-url", b.dsn, "--slot", slot, "--publication", slot, "--table", "public.outbox",
		"--brokers", strings.Join(b.env.Brokers, ","), "--topic", typTopic, "--header-columns", "type:eventType",
		"--http-addr", freeAddr(),
	}
	bin := b.walrelayBin(c.Relay)
	c.Settings = "defaults (--status-interval " + flagDefault(bin, "status-interval") + ")"
	var err error
	r.proc, err = rig.StartWalrelay(bin, filepath.Join(b.logDir("logs"), slot+"-"+strconv.Itoa(len(c.RestartS))+".log"), args...)
	return r, err
}

func flagDefault(bin, name string) string {
	d, err := rig.FlagDefault(bin, name)
	if err != nil {
		return "?"
	}
	return d
}

// waitStreaming waits up to 3 minutes until a walsender streams slot.
func (b *bench) waitStreaming(ctx context.Context, slot string, r *running) (int, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if pid := b.walsenderPID(ctx, slot); pid != 0 {
			return pid, nil
		}
		r.lastCheck = time.Time{}
		if err := r.check(ctx); err != nil {
			return 0, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s: nothing streamed slot %s within 3 minutes", r.relay, slot)
}

// waitSlotFree waits up to a minute until no walsender holds slot.
func (b *bench) waitSlotFree(ctx context.Context, slot string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b.walsenderPID(ctx, slot) == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("slot %s still active a minute after its relay was killed", slot)
}

// sleepCheck waits d, checking every second that r still runs.
func sleepCheck(ctx context.Context, r *running, d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := r.check(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Until(end), 250*time.Millisecond)):
		}
	}
	return nil
}

// steadyWriter commits single-row transactions at a fixed rate (row i due
// at begin + i/rate, over k connections) until stopped.
type steadyWriter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sent   atomic.Int64
	begin  time.Time
	mu     sync.Mutex
	err    error
}

func startSteadyWriter(ctx context.Context, dsn, typ string, rate, aggs int) *steadyWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &steadyWriter{cancel: cancel, begin: time.Now().Add(50 * time.Millisecond)}
	k := min(max(rate/500+1, 2), 8)
	interval := float64(time.Second) / float64(rate)
	const ins = `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), $1, $2, 'OrderCreated', bench_payload($3))`
	for c := 0; c < k; c++ {
		w.wg.Add(1)
		go func(c int) {
			defer w.wg.Done()
			conn, err := pgx.Connect(context.WithoutCancel(ctx), dsn)
			if err != nil {
				w.fail(err)
				return
			}
			defer conn.Close(context.WithoutCancel(ctx))
			for i := c; ctx.Err() == nil; i += k {
				if d := time.Until(w.begin.Add(time.Duration(float64(i) * interval))); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				// N.B. not ctx: a cancel in the middle of an insert
				// would leave it uncounted but perhaps committed.
				if _, err := conn.Exec(context.WithoutCancel(ctx), ins, typ, "agg-"+strconv.Itoa(i%aggs), int64(20_000_000+i)); err != nil {
					w.fail(fmt.Errorf("write: %w", err))
					return
				}
				w.sent.Add(1)
			}
		}(c)
	}
	return w
}

func (w *steadyWriter) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	w.cancel()
}

// stop ends the writing and returns the rows committed, the seconds they
// took and the first error.
func (w *steadyWriter) stop() (int, float64, error) {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.sent.Load()), time.Since(w.begin).Seconds(), w.err
}

// crashTable renders the crash workload.
func crashTable(res *Results) string {
	if len(res.Crashes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Crash: kill -9 at a steady rate, default settings\n\n")
	b.WriteString("Single-row transactions at a fixed rate; the relay (Debezium: the Connect worker's JVM) killed with SIGKILL after every interval of streaming and started again at once; an independent consumer reads every record back by its id. Duplicates per crash in events and in seconds of traffic at the rate the writers kept.\n\n")
	b.WriteString("| relay | settings | rate (target) | kills, every s | sent | lost | duplicates | per crash | s of traffic per crash | restart → streaming s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range res.Crashes {
		relay := c.Relay
		if c.Error != "" {
			relay += " (error: " + c.Error + ")"
		}
		rs := make([]string, len(c.RestartS))
		for i, s := range c.RestartS {
			rs[i] = fmt.Sprintf("%.1f", s)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f (%d) | %d, %.0f | %d | %d | %d | %.0f | %.3f | %s |\n",
			relay, c.Settings, c.AchievedRate, c.TargetRate, c.Kills, c.Every, c.Sent, c.Lost, c.Duplicates, c.PerCrashEvents, c.PerCrashSeconds, strings.Join(rs, ", "))
	}
	return b.String()
}

// freeAddr is a loopback address for walrelay's --http-addr: its default,
// :8080, may be taken on a shared machine.
func freeAddr() string {
	addr, err := proc.FreeAddr()
	if err != nil {
		return "127.0.0.1:0"
	}
	return addr
}
