package explore

import (
	"slices"
	"strings"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

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
