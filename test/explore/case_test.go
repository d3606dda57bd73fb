package explore

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// memorySlackMiB is what walrelay may hold beyond --max-inflight-bytes: the
// README's 32 MiB (4 MiB of replication messages, the runtime, franz-go and
// the 16 MiB the soft memory limit adds) and 16 MiB for the garbage
// collector's headroom. Narrow rows peak at 22-26 MiB with a 256 KiB budget
// on the test machine.
const memorySlackMiB = 48

// memoryBoundMiB is the peak RSS a case allows: --max-inflight-bytes +
// memorySlackMiB, whatever the row shape (wide unmapped columns included).
func memoryBoundMiB(inflight int) float64 { return float64(inflight)/(1<<20) + memorySlackMiB }

// caseOutcome is what a case reports to the summary.
type caseOutcome struct {
	seed   uint64
	cfg    config
	result string // the RESULT line, "" when the case stopped early
}

// explorer runs one case.
type explorer struct {
	t      *testing.T
	seed   uint64
	c      config
	rng    *rand.Rand
	shape  harness.Shape
	w      *harness.ShapeWorkload
	e      *harness.Env
	wit    *harness.Witness
	faults *harness.Faults

	writing  *harness.Writing
	relay    *harness.Relay
	args     []string // this case's flags, without --on-poison
	onPoison string
	halted   bool // the halt at the poison row was seen and checked
	inflight int
	dlq      string
	peakRSS  float64         // MiB, over every relay process of the case
	restarts []harness.Fault // pipeline restarts inside a fault's window (restartsDuring)
	pgProxy  *harness.Proxy
	kafkaPx  *harness.Proxy
}

// newRand is the random source of case seed: its draw, then its choices
// while it runs.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// runCase draws case seed and runs it.
func runCase(t *testing.T, seed uint64, out *caseOutcome) {
	x := &explorer{t: t, seed: seed, rng: newRand(seed)}
	x.c = draw(x.rng)
	out.seed, out.cfg = seed, x.c
	t.Logf("CASE seed=%d %s", seed, x.c)
	if f := x.c["fault"]; f == "kafka-restart" || f == "pg-restart" {
		testbed.Disrupt(t)
	}
	x.build()
	x.prepare()
	if x.c["setup"] != "ok" {
		out.result = x.refusal()
		return
	}
	out.result = x.run()
}

// hexBytes is the width of an extra value in hex digits, and the bytes it
// takes in the row.
func extraOf(v string) (typ string, digits, bytes int) {
	switch v {
	case "text-2k":
		return "text", 2048, 2048
	case "jsonb-30k":
		return "jsonb", 30 << 10, 30 << 10
	case "bytea-100k":
		return "bytea", 200 << 10, 100 << 10
	}
	return "", 0, 0
}

// build turns the draw into a shape, a workload and relay flags.
func (x *explorer) build() {
	c := x.c
	s := harness.Shape{Tables: []string{"outbox_a"}, IDType: c["id"], KeyType: c["key"], PayloadType: c["payload"]}
	if c["tables"] == "2" {
		s.Tables = append(s.Tables, "outbox_b")
	}
	if c["table"] != "plain" {
		s.Partitioning = c["table"]
	}
	s.AttachLater = c["attach"] == "yes"
	var extraBytes int
	s.ExtraType, s.ExtraBytes, extraBytes = extraOf(c["extra"])
	// N.B. wide rows are bounded per case (30 MiB) and per transaction
	// (8 MiB, 20 MiB for the huge one), so a case stays cheap.
	budget := func(n, bytes int) int {
		if extraBytes == 0 {
			return n
		}
		return max(1, min(n, bytes/extraBytes))
	}
	w := &harness.ShapeWorkload{Shape: s, Seed: x.seed, Pad: 20 + x.rng.IntN(380), Events: 1500, MinTxRows: 1, MaxTxRows: 10, Pause: time.Millisecond}
	switch c["tx"] {
	case "single":
		w.MaxTxRows, w.Events = 1, 600
	case "1-1000":
		w.MaxTxRows, w.Events, w.Pause = budget(1000, 8<<20), 3000, 0
	case "huge":
		w.Huge = max(100, budget(3000, 20<<20))
	case "100k":
		w.Events, w.Huge = 600, max(100, budget(100_000, 20<<20))
	}
	w.Events = budget(w.Events, 30<<20)
	w.MaxTxRows = min(w.MaxTxRows, w.Events)
	switch c["writers"] {
	case "1":
		w.Writers, w.Aggregates = 1, 200
	case "3-shared":
		w.Writers, w.Aggregates = 3, 4
	default:
		w.Writers, w.Aggregates = 3, 200
	}
	if c["business"] == "yes" {
		w.Business = 0.3
	}
	if c["rollback"] == "yes" {
		w.Rollback = 0.1
	}
	if c["savepoint"] == "yes" {
		w.Savepoint = 0.3
	}
	if c["delete"] == "yes" {
		w.Delete = 0.2
	}
	switch c["poison"] {
	case "dead-letter":
		w.Poison = 3
	case "halt":
		w.Poison = 1
	}
	if c["setup"] != "ok" {
		*w = harness.ShapeWorkload{Shape: s, Seed: x.seed, Pad: 40, Events: 30, Writers: 1, Aggregates: 10, MaxTxRows: 5}
	}
	x.shape, x.w = s, w

	headers := map[string]string{"none": "", "type": "type:eventType", "type+seq": "type:eventType,seq:seq"}[c["headers"]]
	x.inflight = sink.DefaultMaxInflightBytes
	switch c["inflight"] {
	case "1MiB":
		x.inflight = 1 << 20
	case "256KiB":
		x.inflight = 256 << 10
	}
	linger := map[string]string{"0": "0s", "5ms": "5ms", "50ms": "50ms", "n/a": "0s"}[c["linger"]]
	compression := c["compression"]
	if compression == "n/a" {
		compression = "lz4"
	}
	x.args = []string{
		"--table", s.QualifiedTables(),
		"--header-columns", headers,
		"--kafka-compression", compression,
		"--kafka-linger", linger,
		"--max-inflight-bytes", strconv.Itoa(x.inflight),
	}
	if x.inflight < 1048588 {
		// N.B. walrelay refuses an in-flight budget below the batch size
		// (setup=inflight-below-batch checks that).
		x.args = append(x.args, "--kafka-max-message-bytes", strconv.Itoa(x.inflight))
	}
	if c["delivery-timeout"] == "5s" {
		x.args = append(x.args, "--kafka-delivery-timeout", "5s")
	}
	x.onPoison = "dead-letter"
	if c["poison"] == "halt" {
		x.onPoison = "halt"
	}
}

// prepare creates the database, the witness, the tables, the topics and
// the publication the case draws.
func (x *explorer) prepare() {
	t, c := x.t, x.c
	x.e = harness.NewEnv(t, relayBin)
	x.dlq = "walrelay.dlq." + x.e.Prefix
	x.args = append(x.args, "--dlq-topic", x.dlq)
	if c["tx"] == "huge" || c["tx"] == "100k" {
		// N.B. set before the slot exists: its walsenders spill the huge
		// transaction to disk.
		x.e.SetDatabase(t, "logical_decoding_work_mem", "64kB")
	}
	// N.B. the witness slot exists before the first outbox row is written.
	x.wit = harness.NewWitness(t, x.e)
	x.wit.DrainEvery(t, 5*time.Second)
	x.faults = harness.NewFaults(t, x.e)
	x.w.Prepare(t, x.e)
	for _, topic := range x.e.Topics() {
		switch c["topic"] {
		case "fewer-partitions":
			x.e.Bed.CreateTopic(t, topic, 1)
		case "small-max-message":
			// N.B. 6000 bytes holds the largest record of any case (a
			// payload of at most 400 hex digits of padding) several times:
			// no record is too large on its own.
			x.e.Bed.CreateTopicWith(t, topic, 3, map[string]string{"max.message.bytes": "6000"})
		case "compact":
			x.e.Bed.CreateTopicWith(t, topic, 3, map[string]string{"cleanup.policy": "compact"})
		}
	}
	if c["publication"] == "pre-created" {
		x.e.Bed.Exec(t, x.e.DSN, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')",
			x.e.Pub, strings.Join(x.shape.Tables, ", ")))
	}
	switch c["fault"] {
	case "pg-cut":
		x.pgProxy = harness.NewPGProxy(t, harness.PGHostPort(t, x.e.DSN))
		x.args = append(x.args, "--pg-url", harness.DSNVia(t, x.e.DSN, x.pgProxy.Addr(), nil))
	case "kafka-cut":
		x.kafkaPx = harness.NewKafkaProxy(t, x.e.Bed.Brokers()[0])
		x.args = append(x.args, "--brokers", x.kafkaPx.Addr())
	}
}

func (x *explorer) startRelay(extra ...string) {
	args := append(slices.Clone(x.args), "--on-poison", x.onPoison)
	x.relay = x.e.StartRelay(x.t, append(args, extra...)...)
}

// retire notes the memory of a relay process that is gone or going.
func (x *explorer) retire() {
	if x.relay != nil {
		x.peakRSS = max(x.peakRSS, x.relay.PeakRSSMB())
	}
}

// refusal runs a case walrelay must refuse: rows are committed, walrelay
// must exit 2 at start naming the fix, and nothing reaches Kafka.
func (x *explorer) refusal() string {
	t := x.t
	var extra []string
	var want string
	switch x.c["setup"] {
	case "missing-table":
		extra, want = []string{"--table", x.shape.QualifiedTables() + ",public.nosuch"}, "public.nosuch"
	case "missing-column":
		extra, want = []string{"--header-columns", "type:eventType,nosuch:x"}, `"nosuch"`
	case "inflight-below-batch":
		extra, want = []string{"--max-inflight-bytes", "65536", "--kafka-max-message-bytes", "1048588"}, "raise it"
	case "unsupported-payload-type":
		// N.B. part is an integer column: no record value walrelay maps.
		extra, want = []string{"--payload-column", "part"}, "--payload-column"
	}
	if err := x.w.Run(t.Context(), x.e); err != nil {
		t.Fatalf("writers: %v", err)
	}
	x.startRelay(extra...)
	deadline := time.Now().Add(90 * time.Second)
	for !x.relay.Exited() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	topics := append(x.e.Topics(), x.dlq)
	if !x.relay.Exited() {
		x.w.Events = 60
		if err := x.w.Run(t.Context(), x.e); err != nil {
			t.Fatalf("writers: %v", err)
		}
		time.Sleep(5 * time.Second)
		x.relay.Kill()
		x.retire()
		recs := x.e.Bed.ConsumeAll(t, topics, time.Second)
		t.Errorf("%s: walrelay did not refuse to start (want exit 2 naming %s): it ran for 90 s; %d records in %v",
			x.c["setup"], want, len(recs), topics)
		return fmt.Sprintf("RESULT seed=%d setup=%s refused=no records=%d", x.seed, x.c["setup"], len(recs))
	}
	code := x.relay.Wait(time.Second)
	x.retire()
	log := x.relay.Log()
	if code != 2 {
		t.Errorf("%s: exit code %d, want 2", x.c["setup"], code)
	}
	if !strings.Contains(log, want) {
		t.Errorf("%s: walrelay's refusal does not name %s", x.c["setup"], want)
	}
	recs := x.e.Bed.ConsumeAll(t, topics, time.Second)
	if len(recs) > 0 {
		t.Errorf("%s: walrelay refused but %d records reached %v", x.c["setup"], len(recs), topics)
	}
	return fmt.Sprintf("RESULT seed=%d setup=%s refused=yes exit=%d records=%d", x.seed, x.c["setup"], code, len(recs))
}

// started waits until walrelay streams. A partitioned outbox in a
// publication made beforehand without publish_via_partition_root may be
// refused instead (exit 2 naming the option): then it reports false.
func (x *explorer) started() bool {
	t := x.t
	mayRefuse := x.c["publication"] == "pre-created" && x.shape.Partitioning != ""
	harness.WaitFor(t, time.Minute, "walrelay to stream the slot", func() bool {
		return x.relay.Exited() || x.e.Walsender(t) != 0
	})
	if !x.relay.Exited() {
		return true
	}
	code := x.relay.Wait(time.Second)
	if mayRefuse && code == 2 && strings.Contains(x.relay.Log(), "publish_via_partition_root") {
		return false
	}
	t.Fatalf("walrelay exited with code %d before streaming: %s", code, lastLine(x.relay.Log(), "walrelay: "))
	return false
}

// action is a step at a point of the workload (committed events).
type action struct {
	at   int64
	name string
	do   func()
}

func (x *explorer) run() string {
	t, c := x.t, x.c
	x.startRelay()
	if !x.started() {
		x.retire()
		return fmt.Sprintf("RESULT seed=%d refused=publish_via_partition_root exit=2 shape=%q", x.seed, c.String())
	}
	x.writing = x.w.Start(x.e)

	var acts []action
	ev := int64(x.w.Events)
	if x.shape.AttachLater {
		acts = append(acts, action{at: ev * 3 / 10, name: "attach", do: func() { x.w.Attach(t, x.e) }})
	}
	// N.B. with --on-poison halt the faults strike after the halt, on the
	// relay that dead-letters: a fault meeting the halt would blur both.
	lo, hi := 0.1, 0.9
	if x.onPoison == "halt" {
		lo, hi = 0.55, 0.95
	}
	n := 1 + x.rng.IntN(2)
	if c["fault"] == "none" {
		n = 0
	}
	for i := 0; i < n; i++ {
		at := int64(float64(ev) * (lo + (hi-lo)*x.rng.Float64()))
		acts = append(acts, action{at: at, name: c["fault"], do: x.inject})
	}
	slices.SortStableFunc(acts, func(a, b action) int { return int(a.at - b.at) })
	for _, a := range acts {
		if a.name != "attach" && x.onPoison == "halt" && !x.halted {
			x.awaitHalt()
		}
		x.waitCommitted(a.at)
		a.do()
	}
	return x.finish()
}

// waitCommitted waits until the writers have committed n events; a relay
// that exits meanwhile fails the case, unless it is the awaited halt.
func (x *explorer) waitCommitted(n int64) {
	t := x.t
	for x.w.Committed() < n {
		select {
		case <-x.writing.Done():
			t.Fatalf("writers stopped at %d events (want %d): %v", x.w.Committed(), n, x.writing.Wait())
		default:
		}
		if x.relay.Exited() {
			if x.onPoison == "halt" && !x.halted {
				x.awaitHalt()
				continue
			}
			x.mustRun("while the writers wrote")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitHalt waits for the relay to stop at the poison row (--on-poison
// halt), checks that it confirmed nothing past it, and starts it again with
// dead-letter.
func (x *explorer) awaitHalt() {
	t := x.t
	polls := 0
	harness.WaitFor(t, 3*time.Minute, "walrelay to halt at the poison row", func() bool {
		if x.relay.Exited() {
			return true
		}
		if polls++; polls%10 == 0 {
			// N.B. a relay that confirms past the poison row instead of
			// halting fails at once: it will not halt any more.
			if first := x.firstPoisonEnd(); first != 0 {
				if confirmed := x.e.Bed.Slot(t, x.e.DSN, x.e.Slot).ConfirmedFlushLSN; confirmed >= first {
					t.Fatalf("halt: walrelay runs on, the slot confirmed %s, at or past the poison row's commit end %s", confirmed, first)
				}
			}
		}
		return false
	})
	code := x.relay.Wait(time.Second)
	x.retire()
	if code != 1 {
		t.Errorf("halt: exit code %d at a poison row with --on-poison halt, want 1", code)
	}
	if !strings.Contains(x.relay.Log(), "--on-poison=halt") {
		t.Errorf("halt: walrelay's log does not say it stopped at a poison event (--on-poison=halt)")
	}
	confirmed := x.e.Bed.Slot(t, x.e.DSN, x.e.Slot).ConfirmedFlushLSN
	first := x.firstPoisonEnd()
	switch {
	case first == 0:
		t.Errorf("halt: walrelay halted, but no poison row is committed")
	case confirmed >= first:
		t.Errorf("halt: slot confirmed %s, at or past the poison row's commit end %s", confirmed, first)
	}
	in := x.faults.Begin("halt")
	x.onPoison = "dead-letter"
	x.startRelay()
	x.waitStreaming()
	in.End()
	x.halted = true
}

// waitStreaming waits until walrelay streams the slot.
func (x *explorer) waitStreaming() {
	harness.WaitFor(x.t, time.Minute, "walrelay to stream the slot", func() bool {
		x.mustRun("before streaming")
		return x.e.Walsender(x.t) != 0
	})
}

// mustRun fails the case if walrelay has exited, with its last complaint.
func (x *explorer) mustRun(when string) {
	if x.relay.Exited() {
		x.t.Fatalf("walrelay exited %s (%v): %s", when, x.relay.Err(), lastLine(x.relay.Log(), "walrelay: "))
	}
}

// firstPoisonEnd is the commit end of the first committed poison row, 0
// while there is none.
func (x *explorer) firstPoisonEnd() pglogrepl.LSN {
	ends := x.wit.CommitEnds(x.t)
	var first pglogrepl.LSN
	for _, r := range x.e.ShapeRows(x.t, x.shape) {
		if end, ok := ends[r.Xid]; r.Poison && ok && (first == 0 || end < first) {
			first = end
		}
	}
	return first
}

// inject strikes the case's fault once and records it.
func (x *explorer) inject() {
	t, e := x.t, x.e
	confirmCaughtUp := func(what string) {
		back := e.Bed.CurrentWALLSN(t, e.DSN)
		harness.WaitFor(t, 3*time.Minute, "walrelay to confirm what was written before "+what+" was over", func() bool {
			x.mustRun("after " + what)
			return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= back
		})
	}
	switch f := x.c["fault"]; f {
	case "kill-9":
		in := x.faults.Begin(f)
		x.relay.Kill()
		in.End()
		x.retire()
		x.startRelay()
	case "sigterm":
		// N.B. not a fault for the checker: a graceful stop resends nothing.
		// It needs a process that catches signals: one SIGTERMed before its
		// main runs (a second stop right after a restart, CI seed 38) dies
		// of the signal, like any program, and that is a kill.
		x.relay.HTTPAddr()
		if code := x.relay.Stop(time.Minute); code != 0 {
			t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
		}
		x.retire()
		x.startRelay()
	case "kafka-restart":
		in, logLen := x.faults.Begin(f), len(x.relay.Log())
		e.Bed.StopKafka(t)
		time.Sleep(2*time.Second + time.Duration(x.rng.IntN(4000))*time.Millisecond)
		if x.relay.Exited() {
			t.Fatalf("walrelay exited while Kafka was down")
		}
		e.Bed.StartKafka(t)
		confirmCaughtUp(f)
		x.restartsDuring(in.End(), logLen)
	case "pg-restart":
		offset := harness.LogOffset(t, e)
		in, logLen := x.faults.Begin(f), len(x.relay.Log())
		e.Bed.RestartPostgres(t)
		x.waitStreaming()
		// N.B. PostgreSQL 15 may resume the slot before the position it
		// showed as confirmed (harness.PGResumePositions).
		if resumed := harness.PGResumePositions(t, e, offset); len(resumed) > 0 {
			in.Resumed(slices.Min(resumed))
		} else {
			t.Fatalf("PostgreSQL logged no new session of slot %s after the restart", e.Slot)
		}
		x.restartsDuring(in.End(), logLen)
	case "pg-cut":
		x.waitStreaming()
		old := e.Walsender(t)
		in, logLen := x.faults.Begin(f), len(x.relay.Log())
		if x.pgProxy.CutAll() == 0 {
			t.Fatalf("pg-cut: the proxy had no connection to cut")
		}
		harness.WaitFor(t, 2*time.Minute, "walrelay to stream again after the cut", func() bool {
			x.mustRun("after the cut")
			now := e.Walsender(t)
			return now != 0 && now != old
		})
		x.restartsDuring(in.End(), logLen)
	case "kafka-cut":
		in, logLen := x.faults.Begin(f), len(x.relay.Log())
		if x.kafkaPx.CutAll() == 0 {
			// N.B. franz-go may hold no connection while it has nothing
			// to send: cut the next produce request instead.
			select {
			case <-x.kafkaPx.CutAfter(harness.KafkaProduce):
			case <-time.After(30 * time.Second):
				x.kafkaPx.Disarm()
				t.Fatalf("kafka-cut: no connection to cut and no produce request within 30 s")
			}
		}
		confirmCaughtUp(f)
		x.restartsDuring(in.End(), logLen)
	}
}

// restartsDuring accounts for the pipeline restarts walrelay logged while
// fault f lasted (its log from logLen on): each restart streams again from
// the confirmed position, so each may resend once what f may resend. The
// first is f's own.
//
// N.B. only restarts inside the fault's window count: a restart nothing
// injected (a delivery timeout while Kafka acknowledges, say) explains no
// duplicate.
func (x *explorer) restartsDuring(f harness.Fault, logLen int) {
	log := x.relay.Log()
	if logLen > len(log) {
		return
	}
	n := strings.Count(log[logLen:], `"msg":"restarting from the last confirmed position"`)
	for i := 1; i < n; i++ {
		x.restarts = append(x.restarts, harness.Fault{Kind: f.Kind + "-pipeline-restart", ConfirmedBefore: f.ConfirmedBefore, WALAfter: f.WALAfter})
	}
}

// finish lets the writers commit their events, waits until walrelay has
// confirmed the last commit, reads everything back and judges it.
func (x *explorer) finish() string {
	t, e, c := x.t, x.e, x.c
	// N.B. the writers stop by themselves once their events, poison rows
	// and huge transaction are committed.
	for done := false; !done; {
		select {
		case <-x.writing.Done():
			done = true
		case <-time.After(10 * time.Millisecond):
			if x.relay.Exited() && x.onPoison == "halt" && !x.halted {
				x.awaitHalt()
			}
			x.mustRun("while the writers wrote")
		}
	}
	if err := x.writing.Wait(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	if x.onPoison == "halt" && !x.halted {
		x.awaitHalt()
	}
	ends := x.wit.CommitEnds(t)
	rows := e.ShapeRows(t, x.shape)
	committed := map[string]harness.OutboxRow{}
	poison := map[string]bool{}
	var last pglogrepl.LSN
	for id, r := range rows {
		end, ok := ends[r.Xid]
		if !ok {
			t.Fatalf("row %s (xid %d) has no commit position in the witness", id, r.Xid)
		}
		last = max(last, end)
		if r.Poison {
			poison[id] = true
			continue
		}
		committed[id] = harness.OutboxRow{ID: id, AggID: r.Key, Seq: r.Seq, Xid: r.Xid}
	}
	events, err := harness.Events(committed, ends)
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 3*time.Minute, fmt.Sprintf("walrelay to confirm the last commit (%s)", last), func() bool {
		x.mustRun("before confirming the last commit")
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= last
	})
	recs := e.Bed.ConsumeAll(t, e.Topics(), time.Second)
	dlqRecs := e.Bed.ConsumeAll(t, []string{x.dlq}, time.Second)
	if code := x.relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	x.retire()

	rep := harness.Check(harness.History{
		Committed:  events,
		Records:    harness.FromKafka(recs),
		Faults:     append(x.faults.List(), x.restarts...),
		RolledBack: x.w.RolledBack(),
	})
	corrupt, badHeaders := x.checkRecords(recs, rows)
	missing, unexpected := checkDeadLetters(dlqRecs, poison)
	bound := memoryBoundMiB(x.inflight)
	result := fmt.Sprintf("RESULT seed=%d events=%d records=%d lost=%d phantom=%d order_violations=%d duplicates=%d unexplained_duplicates=%d wrong_values=%d wrong_headers=%d poison=%d poison_not_dead_lettered=%d dead_lettered_not_poison=%d faults=[%s] pipeline_restarts_in_faults=%d rolled_back=%d outcome_unknown=%d peak_rss_mib=%.1f inflight_mib=%.2f bound_mib=%.1f shape=%q",
		x.seed, rep.Events, rep.Records, rep.Lost, rep.Phantom, rep.OrderViolations, rep.Duplicates, rep.UnexplainedDuplicates,
		corrupt, badHeaders, len(poison), missing, unexpected, x.faults.Summary(), len(x.restarts), len(x.w.RolledBack()), x.w.Unknown(),
		x.peakRSS, float64(x.inflight)/(1<<20), bound, c.String())
	t.Log(result)
	if !rep.OK() {
		t.Errorf("invariants violated: %s", rep.Summary())
	}
	if rep.Events < x.w.Events {
		t.Errorf("%d events committed, the case wants at least %d", rep.Events, x.w.Events)
	}
	// N.B. a halt on a poison row leaves what it had produced unconfirmed:
	// the next relay sends it again. Only graceful stops alone must not
	// duplicate anything (seed 7032: a halt, then SIGTERMs).
	if c["fault"] == "sigterm" && c["poison"] != "halt" && rep.Duplicates > 0 {
		t.Errorf("%d duplicates after graceful stops, want 0", rep.Duplicates)
	}
	if corrupt > 0 || badHeaders > 0 {
		t.Errorf("%d records with a value and %d with headers other than the committed row's", corrupt, badHeaders)
	}
	if missing > 0 || unexpected > 0 {
		t.Errorf("dead-letter topic %s: %d of %d poison rows missing, %d records of rows that are not poison", x.dlq, missing, len(poison), unexpected)
	}
	if x.w.Poison > 0 && len(poison) == 0 {
		t.Errorf("no poison row was committed: --on-poison was not put to the test")
	}
	if x.peakRSS > bound {
		t.Errorf("peak RSS %.1f MiB over the bound %.1f MiB (--max-inflight-bytes %d + %d MiB)", x.peakRSS, bound, x.inflight, memorySlackMiB)
	}
	if x.w.Huge > 0 && !x.w.HugeDone() {
		t.Errorf("the huge transaction never committed")
	}
	return result
}

// checkRecords compares each record of a committed row with the row: its
// value, and the headers --header-columns maps.
func (x *explorer) checkRecords(recs []*kgo.Record, rows map[string]harness.ShapeRow) (corrupt, badHeaders int) {
	t := x.t
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		row, ok := rows[id]
		if !ok || row.Poison {
			continue // the checker counts it as a phantom
		}
		got := string(r.Value)
		if x.shape.PayloadType == "bytea" {
			got = hex.EncodeToString(r.Value)
		}
		switch {
		case row.Value == nil && r.Value != nil, row.Value != nil && *row.Value != got:
			corrupt++
			if corrupt <= 3 {
				t.Logf("wrong value: record %s at %s[%d]@%d: %q, the row's %v", id, r.Topic, r.Partition, r.Offset, trim(got), trimp(row.Value))
			}
		}
		typ, hasType := harness.Header(r, "eventType")
		seq, hasSeq := harness.Header(r, "seq")
		var ok2 bool
		switch x.c["headers"] {
		case "none":
			ok2 = !hasType && !hasSeq
		case "type":
			ok2 = typ == "OrderCreated" && !hasSeq
		default:
			ok2 = typ == "OrderCreated" && seq == strconv.FormatInt(row.Seq, 10)
		}
		if !ok2 {
			badHeaders++
			if badHeaders <= 3 {
				t.Logf("wrong headers: record %s: %v", id, r.Headers)
			}
		}
	}
	return corrupt, badHeaders
}

// checkDeadLetters counts poison rows without a dead-letter record, and
// dead-lettered rows that are not poison.
func checkDeadLetters(dlq []*kgo.Record, poison map[string]bool) (missing, unexpected int) {
	seen := map[string]bool{}
	for _, r := range dlq {
		id, _ := harness.Header(r, "walrelay.event.id")
		if !poison[id] && !seen[id] {
			unexpected++
		}
		seen[id] = true
	}
	for id := range poison {
		if !seen[id] {
			missing++
		}
	}
	return missing, unexpected
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func trimp(s *string) string {
	if s == nil {
		return "NULL"
	}
	return trim(*s)
}

// lastLine is the last line of log that contains marker, and the one after
// it (walrelay's refusals list their problems on the next lines).
func lastLine(log, marker string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], marker) {
			if i+1 < len(lines) {
				return lines[i] + " " + strings.TrimSpace(lines[i+1])
			}
			return lines[i]
		}
	}
	return "(no line with " + marker + ")"
}
