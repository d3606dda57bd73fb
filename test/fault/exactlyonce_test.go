package fault

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestZombieFencedExactlyOnce: two walrelay processes with --exactly-once
// on one slot, each reaching Kafka through a proxy of its own. The active
// one's commit request (EndTxn) is held in its proxy, and the process is
// paused with SIGSTOP; PostgreSQL drops its walsender
// (wal_sender_timeout), the standby takes the slot, fences the paused
// one's transactional id and streams. The paused one is then resumed and
// its commit request released: nothing of it is committed, the zombie goes
// back to waiting for the slot, and the walrelay holding the slot is not
// disturbed: it is never fenced by the zombie. Again and again, roles
// swapping when the holder loses the slot on a loaded machine. A
// read_committed consumer reads each event once.
func TestZombieFencedExactlyOnce(t *testing.T) {
	t.Parallel()
	rounds := scale(3, 12)
	s := exactlyOnce.in(newScenario(t, defaultWorkload(scale(12000, 120000))))
	// N.B. the walsender of a paused walrelay ends after this long without
	// a reply, and the standby takes over.
	s.e.SetDatabase(t, "wal_sender_timeout", "4s")
	n := 0
	proxies := map[*harness.Relay]*harness.Proxy{}
	start := func() (*harness.Relay, string) {
		n++
		name := fmt.Sprintf("walrelay_%s_%d", s.e.Prefix, n)
		proxy := harness.NewKafkaProxy(t, s.e.Bed.Brokers()[0])
		r := s.e.StartRelay(t, "--pg-url", harness.DSNVia(t, s.e.DSN, "", map[string]string{"application_name": name}), "--brokers", proxy.Addr())
		proxies[r] = proxy
		return r, name
	}
	active, activeName := start()
	active.WaitStreaming()
	s.write()
	standby, standbyName := start()

	slice := s.events / rounds
	fencedSeen, holderFenced, swapped := 0, 0, 0
	var times []time.Duration
	for i := 0; i < rounds; i++ {
		harness.WaitFor(t, time.Minute, "the standby to wait for the slot", func() bool {
			if standby.Exited() || active.Exited() {
				t.Fatalf("a walrelay exited")
			}
			st := streamers(t, s.e)
			if slices.Equal(st, []string{standbyName}) {
				// N.B. an unplanned takeover (the holder's connection to
				// PostgreSQL timed out on a loaded machine): roles swap.
				active, activeName, standby, standbyName = standby, standbyName, active, activeName
			}
			return strings.Count(standby.Log(), "waiting to take over") > 0 && slices.Equal(st, []string{activeName})
		})
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), active)
		in := s.faults.Begin("sigstop-active")
		held, release := proxies[active].HoldBefore(harness.KafkaEndTxn)
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatalf("the active walrelay sent no commit request within 30s")
		}
		paused := time.Now()
		if err := syscall.Kill(active.Pid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		harness.WaitFor(t, 2*time.Minute, "the standby to take over from the paused walrelay", func() bool {
			if standby.Exited() {
				t.Fatalf("the standby walrelay exited instead of taking over")
			}
			return slices.Equal(streamers(t, s.e), []string{standbyName})
		})
		times = append(times, time.Since(paused).Round(10*time.Millisecond))
		// The new holder commits Kafka transactions of its own before the
		// zombie wakes up.
		at := s.wal()
		harness.WaitFor(t, time.Minute, fmt.Sprintf("the new active walrelay to confirm past %s", at), func() bool {
			return s.confirmed() >= at
		})
		before, standbyBefore := active.Log(), standby.Log()
		if err := syscall.Kill(active.Pid(), syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		release()
		restarted := func() bool {
			return strings.Count(active.Log(), "restarting from the last confirmed position") > strings.Count(before, "restarting from the last confirmed position")
		}
		harness.WaitFor(t, time.Minute, "the resumed walrelay's attempt to end", func() bool {
			if active.Exited() {
				t.Fatalf("the resumed walrelay exited")
			}
			return restarted()
		})
		for _, l := range strings.Split(active.Log()[len(before):], "\n") {
			if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
				t.Logf("zombie: %.300s", l)
			}
		}
		if after := active.Log()[len(before):]; strings.Contains(after, "fenced (a newer producer") {
			fencedSeen++
		}
		// N.B. either may hold the slot now: the zombie starts over as a
		// new producer, and fences the other if it gets the slot first.
		var streaming []string
		harness.WaitFor(t, time.Minute, "one walrelay to stream", func() bool {
			streaming = streamers(t, s.e)
			return len(streaming) == 1
		})
		// N.B. the zombie's teardown once aborted its transaction by
		// initializing the producer id at its old epoch, and the
		// coordinator aborted the holder's ongoing transaction for it.
		if l := standby.Log()[len(standbyBefore):]; strings.Contains(l, "fenced (a newer producer") {
			holderFenced++
			for _, line := range strings.Split(l, "\n") {
				if strings.Contains(line, "fenced (a newer producer") {
					t.Logf("holder: %.400s", line)
				}
			}
		}
		in.End()
		if streaming[0] == activeName {
			swapped++
		} else {
			active, activeName, standby, standbyName = standby, standbyName, active, activeName
		}
	}
	standby.Kill()
	t.Logf("the last active walrelay is %s", activeName)
	rep := s.finish(active, fmt.Sprintf("takeover=%v zombie_fenced_errors=%d holder_fenced=%d zombie_took_slot_back=%d", times, fencedSeen, holderFenced, swapped))
	stopRelay(t, active)
	t.Logf("FIGURES rounds=%d takeover_times=%v zombie_commit_fenced=%d holder_fenced=%d zombie_took_slot_back=%d events=%d duplicates=%d",
		rounds, times, fencedSeen, holderFenced, swapped, rep.Events, rep.Duplicates)
	if holderFenced > 0 {
		t.Errorf("in %d of %d rounds the resumed walrelay fenced the one holding the slot", holderFenced, rounds)
	}
}
