package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestKafkaStallKeepsTheReplicationConnection: Kafka takes no records for
// longer than walrelay's liveness limit on PostgreSQL (four status
// intervals), so the in-flight limit and the replication buffer fill and
// walrelay stops reading the stream. Once Kafka answers again walrelay goes
// on reading the same connection: waiting on Kafka is not PostgreSQL's
// silence. Every committed event reaches Kafka, in order, and walrelay
// never restarted.
func TestKafkaStallKeepsTheReplicationConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.Collect(t)
	// N.B. about 17 MB of single-row transactions: more than the 4 MiB
	// replication buffer and the in-flight limit together, so the stream
	// waits for room with the rest still in PostgreSQL.
	w := &harness.Workload{Writers: 2, Events: 4000, Aggregates: 20, MaxTxRows: 1, Pad: 4000}
	w.Prepare(t, e.Env)
	kafka := harness.NewKafkaProxy(t, e.Bed.Brokers()[0])
	const interval = time.Second
	relay := e.Start(t, "--brokers", kafka.Addr(), "--status-interval", interval.String(),
		"--max-inflight-bytes", "2097152", "--kafka-delivery-timeout", "2m")
	relay.WaitStreaming()
	heal := kafka.Isolate()
	if err := w.Run(t.Context(), e.Env); err != nil {
		t.Fatalf("writers: %v", err)
	}
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	// The stall lasts beyond four status intervals, with the stream stopped
	// short of the last commit.
	harness.WaitFor(t, time.Minute, "records waiting for Kafka beyond four status intervals", func() bool {
		return relay.Metric("walrelay_oldest_unacked_seconds") > (6 * interval).Seconds()
	})
	if got := relay.Metric("walrelay_received_lsn"); uint64(got) >= uint64(end) {
		t.Fatalf("walrelay received up to %s, the whole WAL (%s), while Kafka was held: the stream never waited and the test proves nothing", pglogrepl.LSN(got), end)
	}
	heal()
	rows := e.CommittedRows(t)
	recs := c.WaitFor(len(rows), 2*time.Minute)
	e2etest.CheckRecords(t, e, recs, rows, w.RolledBack(), 3, false)
	if n, _ := relay.MetricOK("walrelay_restarts_total"); n != 0 {
		t.Errorf("walrelay_restarts_total = %v after Kafka stalled, want 0: waiting on Kafka was taken for a dead PostgreSQL connection", n)
	}
	if log := relay.Log(); strings.Contains(log, "restarting from the last confirmed position") {
		t.Errorf("walrelay restarted its pipeline after Kafka stalled:\n%s", grepLines(log, "restarting"))
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
