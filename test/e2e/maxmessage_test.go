package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestRowLargerThanPGMaxMessageBytes: a row whose replication message is
// larger than --pg-max-message-bytes stops walrelay with exit 2 and a
// message naming the position, the size and the flag; nothing is confirmed
// past it. Started again with the flag raised, walrelay relays it and what
// follows.
func TestRowLargerThanPGMaxMessageBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// N.B. the wide column is not mapped: the record stays small, only the
	// replication message (the whole row) is large.
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN wide text`)
	const limit, wide = 1 << 20, 2 << 20
	wit := e.Witness(t)
	c := e.Collect(t)
	relay := e.Start(t, "--pg-max-message-bytes", strconv.Itoa(limit))
	relay.WaitStreaming()

	before := e.ExecXid(t, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)
	big := e.ExecXid(t, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 2}', repeat('x', $3::int))`, harness.NewUUID(), e.AggType(0), wide)
	after := e.ExecXid(t, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 3}')`, harness.NewUUID(), e.AggType(0))
	if code := relay.Wait(time.Minute); code != 2 {
		t.Fatalf("exit code %d, want 2 for a row larger than --pg-max-message-bytes", code)
	}
	log := relay.Log()
	m := regexp.MustCompile(`message of (\d+) bytes after LSN ([0-9A-F]+/[0-9A-F]+)`).FindStringSubmatch(log)
	if m == nil || !strings.Contains(log, "--pg-max-message-bytes") || !strings.Contains(log, strconv.Itoa(limit)) {
		t.Fatalf("the log does not name the message's size and position, the limit %d and --pg-max-message-bytes:\n%s", limit, log)
	}
	size, _ := strconv.Atoi(m[1])
	if size < wide || size > wide+4096 {
		t.Errorf("reported size %d bytes; the row holds %d bytes of its wide column and little else", size, wide)
	}
	ends := wit.CommitEnds(t)
	lsn, err := pglogrepl.ParseLSN(m[2])
	if err != nil {
		t.Fatal(err)
	}
	if lsn < ends[before] || lsn >= ends[big] {
		t.Errorf("reported LSN %s is not within the large row's transaction (after %s, before its commit end %s)", lsn, ends[before], ends[big])
	}
	e.CheckPending(t, wit, big, "the transaction with the large row")
	e.CheckPending(t, wit, after, "the transaction after the large row")

	// Raised, the limit lets the row through, and everything after it.
	// N.B. the records are read once the slot is confirmed past the last
	// transaction, so Kafka holds all of them: a count of records alone
	// may be reached by the first row's second copy (it was not confirmed
	// before the refusal, so it is sent again) before the last row
	// arrives, which read as a lost event on a busy machine.
	relay = e.Start(t, "--pg-max-message-bytes", strconv.Itoa(4*wide))
	rows := e.CommittedRows(t)
	harness.WaitFor(t, time.Minute, "confirmed_flush_lsn to pass the large row", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= wit.CommitEnds(t)[after]
	})
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, nil, 3, true)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("FIGURES refused_message_bytes=%d peak_rss_mb_relaying_it=%.1f", size, relay.PeakRSSMB())
}
