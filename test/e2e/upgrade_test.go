package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// previousRelease is the commit of the release before the restructuring of
// issue 28: its slot markers and exactly-once checkpoint records must be
// read by today's walrelay.
const previousRelease = "8e87de4"

// buildRelease builds walrelay as it was at commit rev, from this
// repository's history, into a directory of the test's.
func buildRelease(t *testing.T, rev string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v (the upgrade test builds the previous release from the repository's history)", err)
	}
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", strings.TrimSpace(string(top)), rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(t.TempDir(), "walrelay-"+rev)
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+rev, "-o", bin, "./cmd/walrelay")
	build.Dir = src
	build.Env = harness.ShippedBuildEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build walrelay %s: %v\n%s", rev, err, out)
	}
	return bin
}

// TestRollingUpgrade: the previous release streams a slot with
// --exactly-once under a workload with rollbacks, is stopped as a rolling
// upgrade stops it (SIGTERM) once it committed a Kafka transaction, and
// today's walrelay takes over the same slot and checkpoint topic while the
// writers go on. It reads the previous release's slot marker and
// checkpoint: the slot is not created again (events written while neither
// ran would be lost) and no transaction is skipped or produced twice for a
// read_committed consumer.
func TestRollingUpgrade(t *testing.T) {
	old := buildRelease(t, previousRelease)
	e := newEnv(t)
	e.Bin = old
	e.ExactlyOnce()
	wit := harness.NewWitness(t, e.Env)
	w := &harness.Workload{Writers: 3, Aggregates: 100, MaxTxRows: 10, Rollback: 0.1, Business: 0.3, Pause: time.Millisecond}
	w.Prepare(t, e.Env)

	first := &relayProc{Relay: e.StartRelay(t), T: t, Env: e}
	first.WaitStreaming()
	if v := first.Metric(`walrelay_build_info{goversion="` + goVersion(t, old) + `",version="` + previousRelease + `"}`); v != 1 {
		t.Fatalf("the first walrelay is not the previous release (walrelay_build_info %v)", v)
	}
	writing := w.Start(e.Env)
	const n = 2000
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%d events, and a kafka transaction committed by the previous release", n), func() bool {
		c, _ := first.MetricOK(`walrelay_kafka_transactions_total{outcome="committed"}`)
		return w.Committed() >= n && c >= 1
	})
	if code := first.Stop(time.Minute); code != 0 {
		t.Fatalf("previous release: exit code %d after SIGTERM, want 0", code)
	}
	handedOver := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN

	e.Bin = relayBin
	second := &relayProc{Relay: e.StartRelay(t), T: t, Env: e}
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%d events published by today's walrelay", n), func() bool {
		p, _ := second.MetricOK("walrelay_events_published_total")
		return p >= n
	})
	if err := writing.Stop(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	_, _ = eosHistory(t, e.Env, wit, w)
	log := second.Log()
	if !strings.Contains(log, `"exactly-once: checkpoint read`) || strings.Contains(log, `"end_lsn":"0/0"`) {
		t.Errorf("today's walrelay did not read the previous release's checkpoint:\n%s", grepLines(log, "checkpoint"))
	}
	if strings.Contains(log, "created replication slot") {
		t.Errorf("today's walrelay created the slot again:\n%s", grepLines(log, "slot"))
	}
	if slot := e.Bed.Slot(t, e.DSN, e.Slot); slot.ConfirmedFlushLSN < handedOver {
		t.Errorf("slot confirmed at %s after the upgrade, before the %s the previous release confirmed", slot.ConfirmedFlushLSN, handedOver)
	}
	if code := second.Stop(time.Minute); code != 0 {
		t.Errorf("today's walrelay: exit code %d after SIGTERM, want 0", code)
	}
}

// goVersion is the Go version bin was built with, as walrelay_build_info
// labels it.
func goVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command("go", "version", bin).Output()
	if err != nil {
		t.Fatalf("go version %s: %v", bin, err)
	}
	f := strings.Fields(string(out))
	return f[len(f)-1]
}

// TestRollingUpgradeKeepsSlotMarker: the previous release streams a slot
// and records its marker; the slot is then dropped and an event committed.
// Today's walrelay reads the previous release's marker and refuses to
// create the slot again (exit 3), which would skip that event.
func TestRollingUpgradeKeepsSlotMarker(t *testing.T) {
	old := buildRelease(t, previousRelease)
	e := newEnv(t)
	e.Bin = old
	c := e.Collect(t)
	first := &relayProc{Relay: e.StartRelay(t), T: t, Env: e}
	first.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "the slot to be confirmed past the first event", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	if code := first.Stop(time.Minute); code != 0 {
		t.Fatalf("previous release: exit code %d after SIGTERM, want 0", code)
	}
	e.Bed.Exec(t, e.DSN, `SELECT pg_drop_replication_slot($1)`, e.Slot)
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 2}')`, harness.NewUUID(), e.AggType(0))

	e.Bin = relayBin
	second := &relayProc{Relay: e.StartRelay(t), T: t, Env: e}
	harness.WaitFor(t, time.Minute, "today's walrelay to exit or to stream a slot again", func() bool {
		return second.Exited() || e.Walsender(t) != 0
	})
	if !second.Exited() {
		t.Fatalf("today's walrelay streams from a slot it created although the previous release's marker says it streamed from the dropped one; log:\n%s", grepLines(second.Log(), "slot"))
	}
	if code := second.Wait(time.Second); code != 3 {
		t.Errorf("today's walrelay: exit code %d, want 3 (slot gone)", code)
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Exists {
		t.Errorf("slot %s exists after today's walrelay refused to create it again", e.Slot)
	}
	if log := second.Log(); !strings.Contains(log, "replication slot gone") || !strings.Contains(log, "(recorded ") {
		t.Errorf("today's walrelay does not name the previous release's recorded position; log:\n%s", grepLines(log, "slot"))
	}
}
