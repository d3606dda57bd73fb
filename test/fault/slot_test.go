package fault

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestTwoInstances: two walrelay processes on one slot. Exactly one streams,
// the other waits (not ready) and takes over once the first is killed;
// again and again, each time with a fresh standby. The takeover times are
// figures, not asserted: the wait has a deadline only against a hang.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	takeovers := scale(3, 20)
	s := newScenario(t, defaultWorkload(scale(12000, 150000)))
	// Each process gets an application_name of its own: pg_stat_replication
	// then says which one streams.
	n := 0
	start := func() (*harness.Relay, string) {
		n++
		name := fmt.Sprintf("walrelay_%s_%d", s.e.Prefix, n)
		return s.e.StartRelay(t, "--pg-url", harness.DSNVia(t, s.e.DSN, "", map[string]string{"application_name": name})), name
	}
	active, activeName := start()
	active.WaitStreaming()
	s.write()
	standby, standbyName := start()

	slice := s.events / takeovers
	var times []time.Duration
	for i := 0; i < takeovers; i++ {
		harness.WaitFor(t, 30*time.Second, "the standby to wait for the slot", func() bool {
			if standby.Exited() {
				t.Fatalf("the standby walrelay exited")
			}
			return strings.Contains(standby.Log(), "waiting to take over")
		})
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), active)
		// Exactly one streams, the active one, for a few status intervals.
		for j := 0; j < 5; j++ {
			if got := streamers(t, s.e); !slices.Equal(got, []string{activeName}) {
				t.Fatalf("walsenders streaming: %v, want only %s", got, activeName)
			}
			if code := standby.Ready(); code == 200 {
				t.Errorf("the waiting standby answers /readyz with %d, want not ready", code)
			}
			time.Sleep(300 * time.Millisecond)
		}
		harness.WaitFor(t, 10*time.Second, "the streaming walrelay to be ready", func() bool { return active.Ready() == 200 })

		in := s.faults.Begin("kill-9-active")
		killed := time.Now()
		active.Kill()
		harness.WaitFor(t, 3*time.Minute, "the standby to take over from the killed walrelay", func() bool {
			if standby.Exited() {
				t.Fatalf("the standby walrelay exited instead of taking over")
			}
			return slices.Equal(streamers(t, s.e), []string{standbyName})
		})
		took := time.Since(killed)
		times = append(times, took.Round(10*time.Millisecond))
		in.End()
		active, activeName = standby, standbyName
		standby, standbyName = start()
	}
	standby.Kill()
	rep := s.finish(active, fmt.Sprintf("takeover=%v", times))
	stopRelay(t, active)
	t.Logf("FIGURES takeovers=%d takeover_times=%v max=%s events=%d duplicates=%d",
		takeovers, times, slices.Max(times), rep.Events, rep.Duplicates)
}

// streamers returns the application names of the walsenders streaming e's
// slot (state streaming or catchup; a standby's refused attempts are not).
func streamers(t *testing.T, e *harness.Env) []string {
	t.Helper()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT application_name FROM pg_stat_replication
		WHERE state IN ('streaming', 'catchup')
		  AND (application_name LIKE $2 OR pid = (SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1))`,
		e.Slot, "walrelay_"+e.Prefix+"_%")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestSlotInvalidated: while walrelay is down, PostgreSQL invalidates its
// slot (max_slot_wal_keep_size). walrelay refuses to run, says why, exits 3
// and leaves the slot as it is; only --recreate-lost-slot re-creates it, and
// then exactly the events written while the slot was lost are missing.
func TestSlotInvalidated(t *testing.T) {
	testbed.Disrupt(t) // max_slot_wal_keep_size is server-wide
	e := harness.NewEnv(t, relayBin)
	w := &harness.Workload{Writers: 2, Aggregates: 50, MaxTxRows: 5, Rollback: 0.1, Business: 0.3}
	w.Prepare(t, e)

	// Before: walrelay streams and confirms what is written.
	relay := e.StartRelay(t)
	relay.WaitStreaming()
	w.Events = scale(2000, 20000)
	if err := w.Run(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	before := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "walrelay to confirm the first events", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= before
	})
	stopRelay(t, relay)

	// While it is down: outbox events, then WAL until the slot is lost.
	e.Bed.Exec(t, e.Bed.PGURL(), "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
	e.Bed.Exec(t, e.Bed.PGURL(), "SELECT pg_reload_conf()")
	restored := false
	restore := func() {
		if !restored {
			restored = true
			e.Bed.Exec(t, e.Bed.PGURL(), "ALTER SYSTEM RESET max_slot_wal_keep_size")
			e.Bed.Exec(t, e.Bed.PGURL(), "SELECT pg_reload_conf()")
		}
	}
	t.Cleanup(restore)
	lostIDs := writeOutbox(t, e, 100)
	deadline := time.Now().Add(2 * time.Minute)
	for e.Bed.Slot(t, e.DSN, e.Slot).WALStatus != "lost" {
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not lost after 2 minutes of WAL: %+v", e.Slot, e.Bed.Slot(t, e.DSN, e.Slot))
		}
		e.Bed.Exec(t, e.DSN, `INSERT INTO orders (customer, total, note) SELECT 'c', i, repeat('w', 1000) FROM generate_series(1, 2000) i`)
		e.Bed.Exec(t, e.DSN, `SELECT pg_switch_wal()`)
		e.Bed.Exec(t, e.DSN, `CHECKPOINT`)
	}
	restore()
	lost := slotRow(t, e)

	// Without the flag: a clear error, exit code 3, the slot untouched.
	relay = e.StartRelay(t)
	if code := relay.Wait(time.Minute); code != 3 {
		t.Fatalf("walrelay on a lost slot exited with %d, want 3", code)
	}
	for _, want := range []string{"replication slot lost", `wal_status \"lost\"`, "--recreate-lost-slot"} {
		if !strings.Contains(relay.Log(), want) {
			t.Errorf("walrelay's log does not say %q", want)
		}
	}
	if after := slotRow(t, e); after != lost {
		t.Errorf("walrelay changed the lost slot:\n before %s\n  after %s", lost, after)
	}

	// With --recreate-lost-slot: a new slot, streaming resumes, and the
	// events written while the old one was lost are gone, as the flag's
	// help says.
	if help := flagHelp(t, "recreate-lost-slot"); !strings.Contains(help, "events") || !strings.Contains(strings.ToLower(help), "lost") {
		t.Errorf("--recreate-lost-slot's help does not say that events are lost: %q", help)
	}
	relay = e.StartRelay(t, "--recreate-lost-slot")
	relay.WaitStreaming()
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.WALStatus == "lost" || s.RestartLSN == 0 {
		t.Fatalf("slot after --recreate-lost-slot: %+v, want a new one", s)
	}
	w.Events = 2 * w.Events
	if err := w.Run(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "walrelay to confirm the events after re-creation", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
	stopRelay(t, relay)

	rows := e.CommittedRows(t)
	rep := harness.Check(harness.History{
		Committed:  harness.EventsOf(rows),
		Records:    harness.FromKafka(e.Bed.ConsumeAll(t, e.Topics(), time.Second)),
		RolledBack: w.RolledBack(),
	})
	t.Logf("RESULT %s %s faults=[slot-lost=1] lost_while_invalidated=%d", t.Name(), rep, len(lostIDs))
	if rep.Phantom+rep.OrderViolations+rep.Duplicates != 0 || rep.Lost != len(lostIDs) {
		t.Errorf("want exactly the %d events written while the slot was lost missing and nothing else wrong: %s", len(lostIDs), rep.Summary())
	}
	slices.Sort(lostIDs)
	if slices.Sort(rep.LostIDs); !slices.Equal(rep.LostIDs, lostIDs) {
		t.Errorf("missing events %v, want exactly those written while the slot was lost %v", rep.LostIDs, lostIDs)
	}
}

// writeOutbox commits n single-row outbox transactions for aggregate
// agg-lost and returns their ids.
func writeOutbox(t *testing.T, e *harness.Env, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = harness.NewUUID()
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-lost', 'OrderCreated', jsonb_build_object('seq', $3::int))`, ids[i], e.AggType(0), i+1)
	}
	return ids
}

// slotRow renders the slot's row of pg_replication_slots.
func slotRow(t *testing.T, e *harness.Env) string {
	t.Helper()
	var row string
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT s::text FROM pg_replication_slots s WHERE slot_name = $1`, e.Slot).Scan(&row); err != nil {
		t.Fatalf("read slot %s: %v", e.Slot, err)
	}
	return row
}

// flagHelp returns the help text `walrelay run -h` prints for --name.
func flagHelp(t *testing.T, name string) string {
	t.Helper()
	out, _ := exec.Command(relayBin, "run", "-h").CombinedOutput()
	lines := strings.Split(string(out), "\n")
	for i, line := range lines {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "-"+name {
			var help []string
			for _, l := range lines[i+1:] {
				if !strings.HasPrefix(l, "    \t") {
					break
				}
				help = append(help, strings.TrimSpace(l))
			}
			return strings.Join(help, " ")
		}
	}
	t.Fatalf("walrelay run -h lists no --%s:\n%s", name, out)
	return ""
}
