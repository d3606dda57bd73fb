package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

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
	failed bool
}

// disruptive says whether case c stops or restarts a server, and so must
// have the bed to itself (testbed.Disrupt).
func disruptive(c config) bool { return c["fault"] == "kafka-restart" || c["fault"] == "pg-restart" }

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

	relayDSN     string // walrelay's --pg-url: its role, no client_encoding
	role         string // walrelay's own role ("": the harness's)
	rolePassword string
	eventType    string // the type column of every row (addChars)
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
	if disruptive(x.c) {
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
	s.Note = noteOf(c["encoding"])
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
	x.newEnv()
	x.dlq = "walrelay.dlq." + x.e.Prefix
	x.args = append(x.args, "--pg-url", x.relayDSN, "--dlq-topic", x.dlq)
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
	x.alterColumns()
	x.addChars()
	for _, topic := range x.e.Topics() {
		cfg := map[string]string{}
		if c["ts-bound"] == "yes" {
			cfg["message.timestamp.before.max.ms"] = strconv.FormatInt(tsBound.Milliseconds(), 10)
		}
		switch c["topic"] {
		case "fewer-partitions":
			x.e.Bed.CreateTopicWith(t, topic, 1, cfg)
		case "small-max-message":
			// N.B. 6000 bytes holds the largest record of any case (a
			// payload of at most 400 hex digits of padding) several times:
			// no record is too large on its own.
			cfg["max.message.bytes"] = "6000"
			x.e.Bed.CreateTopicWith(t, topic, 3, cfg)
		case "compact":
			cfg["cleanup.policy"] = "compact"
			x.e.Bed.CreateTopicWith(t, topic, 3, cfg)
		default:
			if len(cfg) > 0 {
				x.e.Bed.CreateTopicWith(t, topic, 3, cfg)
			}
		}
	}
	if c["publication"] == "pre-created" {
		x.e.Bed.Exec(t, x.e.DSN, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')",
			x.e.Pub, strings.Join(x.shape.Tables, ", ")))
	}
	switch c["fault"] {
	case "pg-cut":
		x.pgProxy = harness.NewPGProxy(t, harness.PGHostPort(t, x.e.DSN))
		x.args = append(x.args, "--pg-url", harness.DSNVia(t, x.relayDSN, x.pgProxy.Addr(), nil))
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
	if c["ts-bound"] == "yes" {
		acts = append(acts, action{at: ev / 5, name: "backlog", do: x.backlog})
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
	x.checkChars()
	rename := "rename=n/a"
	if c["ddl"] == "rename-key" {
		rename = x.renameKey()
	}
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
	result := fmt.Sprintf("RESULT seed=%d events=%d records=%d lost=%d phantom=%d order_violations=%d duplicates=%d unexplained_duplicates=%d wrong_values=%d wrong_headers=%d poison=%d poison_not_dead_lettered=%d dead_lettered_not_poison=%d faults=[%s] pipeline_restarts_in_faults=%d rolled_back=%d outcome_unknown=%d peak_rss_mib=%.1f inflight_mib=%.2f bound_mib=%.1f %s shape=%q",
		x.seed, rep.Events, rep.Records, rep.Lost, rep.Phantom, rep.OrderViolations, rep.Duplicates, rep.UnexplainedDuplicates,
		corrupt, badHeaders, len(poison), missing, unexpected, x.faults.Summary(), len(x.restarts), len(x.w.RolledBack()), x.w.Unknown(),
		x.peakRSS, float64(x.inflight)/(1<<20), bound, rename, c.String())
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
