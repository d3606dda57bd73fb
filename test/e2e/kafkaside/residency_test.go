package kafkaside

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/proc"
)

// TestStartupPagesLeaveTheResidentSet: the kernel maps 64 KiB around each
// page of the executable a process touches, and start-up runs every
// package's initialisation, spread over the whole executable: 87 % of
// walrelay's code was resident after it, though relaying uses a fraction.
// Once it holds its slot, before it reads from it, walrelay drops its
// executable's read-only pages from its resident set (they stay in the
// page cache): with events relayed since, less than two thirds of those
// mappings are resident again (about half on this test's machine; four
// fifths before the trim).
func TestStartupPagesLeaveTheResidentSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	const dropped = "start-up pages of the executable dropped from the resident set"
	harness.WaitFor(t, time.Minute, "walrelay to drop its start-up pages", func() bool {
		return strings.Contains(relay.Log(), dropped)
	})
	for i := range 100 {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES (gen_random_uuid(), $1, 'agg-' || ($2::int % 7), 'T', jsonb_build_object('n', $2::int))`, e.AggType(0), i)
	}
	c.WaitFor(100, time.Minute)
	rss, size := proc.ExecReadOnlyKB(relay.Pid())
	t.Logf("FIGURES exec_read_only_kb=%d resident_kb=%d rss_file_kb=%d vm_rss_kb=%d", size, rss, proc.StatusKB(relay.Pid(), "RssFile"), proc.StatusKB(relay.Pid(), "VmRSS"))
	if size == 0 {
		t.Fatalf("no read-only mapping of walrelay's executable in /proc/%d/smaps", relay.Pid())
	}
	if rss >= size*2/3 {
		t.Errorf("%d of walrelay's %d kB of read-only executable mappings resident, want less than two thirds", rss, size)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
