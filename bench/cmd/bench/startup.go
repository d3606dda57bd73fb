package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/testbed"
)

// startupBacklog is the backlog each start of the startup workload finds.
const startupBacklog = 1000

// Startup is one walrelay start on a warm broker (its checkpoint topic and
// the records' topic exist, the broker has served them): milliseconds from
// the process's start until a walsender streams the slot and until the
// first record of a waiting backlog is in Kafka (the topic's end offsets,
// asked every 2 ms), and walrelay's own log stamps of its phases.
type Startup struct {
	Kind        string  `json:"kind"` // "backlog, slot exists" or "new pipeline (--create)"
	StreamingMS float64 `json:"start_to_streaming_ms"`
	FirstAckMS  float64 `json:"start_to_first_record_in_kafka_ms,omitempty"`
	// Phases: ms from the process's start to each of walrelay's log
	// lines "starting", "postgresql tls" (the preflight's first answer),
	// "streaming" and the first "confirmed".
	Phases map[string]float64 `json:"log_phases_ms,omitempty"`
	Error  string             `json:"error,omitempty"`
}

// runStartup starts walrelay BENCH_STARTUP_ROUNDS times on a slot with a
// backlog waiting, and as many times as a new pipeline (a slot and
// publication it creates itself).
func (b *bench) runStartup(ctx context.Context) error {
	// N.B. names of this run only: walrelay's marker store remembers a
	// slot it streamed and refuses one of that name made anew (a kept bed).
	run := time.Now().Format("150405")
	slot := slotName("su_"+run, relayWalrelay)
	if _, err := rig.CreateSlot(ctx, b.dsn, slot, slot); err != nil {
		return err
	}
	defer func() {
		if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slot, slot); err != nil {
			logf("%v", err)
		}
	}()
	typ := "startup_" + run
	topic := topicPrefix(relayWalrelay) + typ
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, topic); err != nil {
		return err
	}
	var errs []error
	var sent int64
	for i := 0; i <= b.cfg.startupRounds && ctx.Err() == nil; i++ {
		if err := testbed.Exec(ctx, b.dsn, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
			SELECT gen_random_uuid(), $1, 'agg-' || i, 'OrderCreated', bench_payload(i) FROM generate_series(1, $2::int) i`, typ, startupBacklog); err != nil {
			return err
		}
		s := b.startOnce(ctx, "backlog, slot exists", slot, slot, topic, sent)
		sent += startupBacklog
		if i == 0 { // the first start warms the broker: not counted
			continue
		}
		b.res.Startups = append(b.res.Startups, s)
		if s.Error != "" {
			errs = append(errs, fmt.Errorf("startup: %s", s.Error))
		}
	}
	for i := 0; i < b.cfg.startupRounds && ctx.Err() == nil; i++ {
		name := slotName("su_new_"+run, strconv.Itoa(i))
		s := b.startOnce(ctx, "new pipeline (--create)", name, name, "", 0)
		b.res.Startups = append(b.res.Startups, s)
		if s.Error != "" {
			errs = append(errs, fmt.Errorf("startup: %s", s.Error))
		}
		if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, name, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startOnce starts walrelay on slot and pub, measures, and stops it once
// topic (if any) holds want+startupBacklog records.
func (b *bench) startOnce(ctx context.Context, kind, slot, pub, topic string, want int64) (s Startup) {
	s = Startup{Kind: kind}
	w, err := rig.NewSlotWatcher(ctx, b.dsn)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer w.Close()
	log := filepath.Join(b.logDir("logs"), slot+"-"+time.Now().Format("150405.000")+".log")
	args := []string{"--pg-url", b.dsn, "--slot", slot, "--publication", pub, "--table", "public.outbox",
		"--brokers", strings.Join(b.env.Brokers, ","), "--topic", topicPrefix(relayWalrelay) + "${aggregatetype}",
		"--header-columns", "type:eventType", "--log-level", "debug", "--http-addr", freeAddr()}
	p, err := rig.StartWalrelay(b.bin, log, args...)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	t0 := p.Started
	defer func() {
		if err := p.Stop(45 * time.Second); err != nil && s.Error == "" {
			s.Error = "stop: " + err.Error()
		}
		s.Phases = logPhases(log, t0)
		logf("startup: %s: streaming after %.0f ms, first record in Kafka after %.0f ms; phases %v%s", kind, s.StreamingMS, s.FirstAckMS, s.Phases, errSuffix(s.Error))
	}()
	var wg sync.WaitGroup
	var ackErr error
	if topic != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) && ctx.Err() == nil && !p.Exited() {
				if n, ok, err := b.adm.TopicRecords(ctx, topic); err == nil && ok && n > want {
					s.FirstAckMS = round(float64(time.Since(t0).Microseconds())/1000, 1)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			ackErr = fmt.Errorf("no record in %s within a minute of the start", topic)
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil {
		if st, err := w.State(ctx, slot); err == nil && st.ActivePID != 0 {
			s.StreamingMS = round(float64(time.Since(t0).Microseconds())/1000, 1)
			break
		}
		if p.Exited() {
			s.Error = fmt.Sprintf("walrelay exited before streaming slot %s (%v); last lines of %s:\n%s", slot, p.Err(), p.LogPath, p.Tail(10))
			break
		}
		if time.Now().After(deadline) {
			s.Error = fmt.Sprintf("slot %s not streamed within a minute; last lines of %s:\n%s", slot, p.LogPath, p.Tail(10))
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if ackErr != nil && s.Error == "" {
		s.Error = ackErr.Error()
	}
	if topic != "" && s.Error == "" {
		if err := b.waitRecords(ctx, topic, want+startupBacklog, time.Minute); err != nil {
			s.Error = err.Error()
		}
	}
	return s
}

// logPhases reads walrelay's JSON log: ms from t0 to the first line of
// each phase.
func logPhases(path string, t0 time.Time) map[string]float64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct{ TS, Msg string }
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Msg {
		case "starting", "postgresql tls", "streaming", "confirmed":
		default:
			continue
		}
		if _, ok := out[l.Msg]; ok {
			continue
		}
		if ts, err := time.Parse(time.RFC3339Nano, l.TS); err == nil {
			out[l.Msg] = round(float64(ts.Sub(t0).Microseconds())/1000, 1)
		}
	}
	return out
}

// startupTable renders the startup workload: the median and the maximum
// of each kind.
func startupTable(res *Results) string {
	if len(res.Startups) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Start-up on a warm broker (ms from the process's start)\n\n")
	fmt.Fprintf(&b, "Backlog: %d single-row transactions waiting on an existing slot; new pipeline: a slot and publication walrelay creates (--create). The first start of each kind is not counted.\n\n", startupBacklog)
	b.WriteString("| kind | starts | streaming: median / max | first record in Kafka: median / max | log: postgresql tls · streaming · first confirmed (median) |\n|---|---:|---:|---:|---|\n")
	kinds := []string{}
	by := map[string][]Startup{}
	for _, s := range res.Startups {
		if _, ok := by[s.Kind]; !ok {
			kinds = append(kinds, s.Kind)
		}
		by[s.Kind] = append(by[s.Kind], s)
	}
	for _, k := range kinds {
		ss := by[k]
		col := func(v func(Startup) float64) (float64, float64) {
			var xs []float64
			for _, s := range ss {
				if x := v(s); x > 0 {
					xs = append(xs, x)
				}
			}
			if len(xs) == 0 {
				return 0, 0
			}
			sort.Float64s(xs)
			return xs[len(xs)/2], xs[len(xs)-1]
		}
		sm, sx := col(func(s Startup) float64 { return s.StreamingMS })
		am, ax := col(func(s Startup) float64 { return s.FirstAckMS })
		tm, _ := col(func(s Startup) float64 { return s.Phases["postgresql tls"] })
		pm, _ := col(func(s Startup) float64 { return s.Phases["streaming"] })
		cm, _ := col(func(s Startup) float64 { return s.Phases["confirmed"] })
		fmt.Fprintf(&b, "| %s | %d | %s / %s | %s / %s | %s · %s · %s |\n", k, len(ss), f0(sm), f0(sx), f0(am), f0(ax), f0(tm), f0(pm), f0(cm))
	}
	return b.String()
}
