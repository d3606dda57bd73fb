package fault

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/test/harness"
)

// TestSlowKafka: Kafka is made slow (a proxy adds latency to its answers and
// throttles what walrelay sends) while writers go on at full speed. walrelay
// stops reading from PostgreSQL once --max-inflight-bytes are in flight, so
// its memory stays bounded while the unread WAL grows far beyond that limit,
// and it keeps answering PostgreSQL: a short wal_sender_timeout never ends
// the stream.
func TestSlowKafka(t *testing.T) {
	t.Parallel()
	const (
		senderTimeout = "5s"      // wal_sender_timeout while the test runs
		rate          = 256 << 10 // bytes per second walrelay may send to Kafka
		latency       = 200 * time.Millisecond
		backlog       = 8 // the unread WAL must reach backlog x limit
	)
	// --max-inflight-bytes: small in CI, the default in the long run.
	limit := scale(4<<20, sink.DefaultMaxInflightBytes)
	// Kafka stays slow for at least minSlow, and until the backlog is
	// reached (at most maxSlow).
	minSlow := scale(20*time.Second, 60*time.Second)
	maxSlow := scale(2*time.Minute, 10*time.Minute)

	s := newScenario(t, &harness.Workload{Writers: 3, Aggregates: 200, MaxTxRows: 10, Rollback: 0.1, Business: 0.3, Pad: 2000})
	// N.B. per database: the walsender of walrelay's slot reads it when it
	// connects, and so does walrelay's check of --status-interval.
	s.e.SetDatabase(t, "wal_sender_timeout", senderTimeout)
	proxy := harness.NewKafkaProxy(t, s.e.Bed.Brokers()[0])
	relay := s.e.StartRelay(t, "--brokers", proxy.Addr(),
		"--max-inflight-bytes", strconv.Itoa(limit),
		// N.B. a produce request holds a batch per partition: small batches
		// keep each request well within the client's request timeout at
		// the throttled rate.
		"--kafka-max-message-bytes", strconv.Itoa(256<<10),
		// N.B. at the throttled rate a full buffer takes minutes to drain:
		// records must not time out while they wait (that would restart
		// the pipeline, a different scenario).
		"--kafka-delivery-timeout", "15m")
	relay.WaitStreaming()
	s.write()

	// Warm up at full speed: the baseline is walrelay's memory with the
	// pipeline busy.
	s.waitCommitted(3000, relay)
	at := s.e.Bed.CurrentWALLSN(t, s.e.DSN)
	harness.WaitFor(t, time.Minute, "walrelay to confirm the warm-up", func() bool {
		return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= at
	})
	baseline := relay.PeakRSSMB()
	walsender := s.e.Walsender(t)
	logOffset := harness.LogOffset(t, s.e)

	in := s.faults.Begin("slow-kafka")
	proxy.SetLatency(latency)
	proxy.SetRate(rate)
	var maxUnread int64
	began := time.Now()
	for time.Since(began) < minSlow || (maxUnread < backlog*int64(limit) && time.Since(began) < maxSlow) {
		time.Sleep(500 * time.Millisecond)
		if relay.Exited() {
			t.Fatalf("walrelay exited while Kafka was slow")
		}
		var unread int64
		var pid int
		err := s.e.Bed.QueryRow(t, s.e.DSN, `SELECT (pg_current_wal_lsn() - r.sent_lsn)::bigint, s.active_pid
			FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = $1`, s.e.Slot).Scan(&unread, &pid)
		if err != nil {
			t.Fatalf("walrelay's walsender is gone while Kafka is slow: %v", err)
		}
		if pid != walsender {
			t.Fatalf("walsender %d replaced by %d while Kafka was slow: the stream was ended", walsender, pid)
		}
		maxUnread = max(maxUnread, unread)
	}
	peak := relay.PeakRSSMB()
	slowFor := time.Since(began)
	proxy.SetLatency(0)
	proxy.SetRate(0)
	if err := s.writing.Stop(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	in.End()

	if pgLog := readFrom(t, s.e.Bed.PGLogPath(), logOffset); strings.Contains(pgLog, "terminating walsender process due to replication timeout") {
		t.Errorf("PostgreSQL ended a walsender for wal_sender_timeout while Kafka was slow")
	}
	if strings.Contains(relay.Log(), "restarting from the last confirmed position") {
		t.Errorf("walrelay restarted its pipeline while Kafka was slow")
	}
	// N.B. reading paused: the WAL PostgreSQL could not send grew far past
	// what walrelay may hold, so the bound below means something.
	if maxUnread < backlog*int64(limit) {
		t.Errorf("unread WAL peaked at %d bytes in %s, under %d x --max-inflight-bytes (%d): Kafka was not slow enough to test the bound",
			maxUnread, maxSlow, backlog, limit)
	}
	// N.B. the bound: records in flight count their key, value and headers;
	// franz-go's record structs, the 1024-message buffer before the sink,
	// one decoded transaction part (1 MiB) and the garbage collector's
	// headroom (GOGC=100 doubles the live heap) come on top.
	if grow := peak - baseline; grow > float64(6*limit)/(1<<20) {
		t.Errorf("peak RSS grew by %.1f MiB (%.1f -> %.1f) while Kafka was slow, more than 6 x --max-inflight-bytes (%d MiB)", grow, baseline, peak, limit>>20)
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES slow=%s limit_mib=%d baseline_rss_mib=%.1f peak_rss_mib=%.1f max_unread_wal_mib=%.1f wal_sender_timeout=%s walsender_kept=%d events=%d",
		slowFor.Round(time.Second), limit>>20, baseline, peak, float64(maxUnread)/(1<<20), senderTimeout, walsender, rep.Events)
}

func readFrom(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(b)) {
		return ""
	}
	return string(b[offset:])
}
