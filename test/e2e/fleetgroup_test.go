package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// groupPipelines are the pipelines of the group tests' file, one database
// each.
var groupPipelines = []string{"p1", "p2", "p3", "p4", "p5", "p6"}

// groupFile is a file of groupPipelines in group $GROUP, with the group
// session $SESSION when set.
func groupFile(vars map[string]string, names []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "brokers: %s\nhttp-addr: 127.0.0.1:0\ngroup: %s\n", vars["BROKERS"], vars["GROUP"])
	if s := vars["SESSION"]; s != "" {
		fmt.Fprintf(&b, "group-session-timeout: %s\n", s)
	}
	fmt.Fprintf(&b, "defaults:\n  publication: outbox_pub\n  table: public.outbox\n  header-columns: type:eventType\n  topic-partitions: 3\n  status-interval: 1s\n  shutdown-timeout: 10s\npipelines:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - name: %s\n    pg-url-file: %s\n    slot: %s_%s\n", n, vars["URL_FILE_"+n], n, vars["UNIQ"])
	}
	return b.String()
}

// replica is one walrelay of a group test.
type replica struct {
	name string
	p    *e2etest.Proc
}

// groupBed makes a database per pipeline and the file of their group.
func groupBed(t *testing.T) (string, []*fleetEnv, map[string]string) {
	t.Helper()
	return groupBedSession(t, "")
}

// groupBedSession is groupBed with group-session-timeout: session, unless
// "".
func groupBedSession(t *testing.T, session string) (string, []*fleetEnv, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	uniq := harness.Uniq()
	vars := map[string]string{"UNIQ": uniq, "GROUP": "g" + uniq, "SESSION": session}
	var envs []*fleetEnv
	for _, name := range groupPipelines {
		e := newEnv(t)
		e.Slot, e.Pub = name+"_"+uniq, "outbox_pub"
		vars["URL_FILE_"+name] = e2etest.WriteFile(t, dir, name+".url", []byte(e.DSN))
		envs = append(envs, &fleetEnv{Env: e, name: name, c: e.Collect(t)})
	}
	vars["BROKERS"] = strings.Join(envs[0].Bed.Brokers(), ",")
	return e2etest.WriteFile(t, dir, "fleet.yaml", []byte(groupFile(vars, groupPipelines))), envs, vars
}

func startReplica(t *testing.T, e *fleetEnv, file, name string) *replica {
	t.Helper()
	return &replica{name: name, p: &e2etest.Proc{Relay: harness.StartProcess(t, e2etest.Bin, nil, []string{"run", "--config", file, "--fleet-instance", name}), T: t, Env: e.Env}}
}

// owned is the pipelines r's /pipelines says it runs, by name, with their
// state; nil when r does not answer yet.
func (r *replica) owned(t *testing.T) map[string]string {
	t.Helper()
	if r.p.HTTPAddr() == "" {
		return nil
	}
	code, body := r.p.Get("/pipelines")
	if code != 200 {
		return nil
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("%s /pipelines: %v: %s", r.name, err, body)
	}
	out := map[string]string{}
	for _, s := range list {
		if s["state"] == "elsewhere" {
			if s["owner"] != nil {
				t.Errorf("%s /pipelines: %v elsewhere with an owner", r.name, s)
			}
			continue
		}
		if s["owner"] != r.name {
			t.Errorf("%s /pipelines: %v: owner is not %s", r.name, s, r.name)
		}
		out[s["name"].(string)] = s["state"].(string)
	}
	return out
}

// groupSpread waits until every pipeline streams on exactly one of rs (from
// their /pipelines, and a walsender on its slot), each of rs running one
// at least, and returns the owner of each.
func groupSpread(t *testing.T, what string, rs []*replica, envs []*fleetEnv) map[string]string {
	t.Helper()
	var owner map[string]string
	var last string
	harness.WaitFor(t, 90*time.Second, what, func() bool {
		owner = map[string]string{}
		claims := map[string][]string{}
		for _, r := range rs {
			if r.p.Exited() {
				t.Fatalf("replica %s exited:\n%s", r.name, r.p.Log())
			}
			for name, state := range r.owned(t) {
				claims[name] = append(claims[name], r.name+":"+state)
				if state == "streaming" {
					owner[name] = r.name
				}
			}
		}
		last = fmt.Sprint(claims)
		runs := map[string]bool{}
		for _, e := range envs {
			if len(claims[e.name]) != 1 || owner[e.name] == "" || e.Walsender(t) == 0 {
				return false
			}
			runs[owner[e.name]] = true
		}
		return len(runs) == min(len(rs), len(envs))
	})
	t.Logf("%s: %s", what, last)
	return owner
}

// readBackAll reads every pipeline's events back (readBack), logs each
// one's figures and returns the duplicates of all.
func readBackAll(t *testing.T, envs []*fleetEnv, rolledBack map[string]bool) int {
	t.Helper()
	total := 0
	for _, e := range envs {
		n, v := readBack(t, e, rolledBack, false)
		total += v.Duplicates
		t.Logf("FIGURES pipeline=%s events=%d duplicates=%d", e.name, n, v.Duplicates)
	}
	return total
}

// streamedByTwo samples pg_stat_replication until stop, and counts the
// samples that found two walsenders on one of envs' databases (each has
// one slot: two would stream it twice).
func streamedByTwo(t *testing.T, envs []*fleetEnv, stop <-chan struct{}) func() (int, int) {
	var dbs []string
	for _, e := range envs {
		dbs = append(dbs, e.Database(t))
	}
	return harness.SampleStreamedTwice(t, envs[0].DSN, dbs, stop)
}

// writeAsync starts writers on each of envs, two each, a transaction every
// pause each, until the function it returns is called; that one stops them
// and returns the ids rolled back.
func writeAsync(t *testing.T, envs []*fleetEnv, pause time.Duration) func() map[string]bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, len(envs))
	var ws []*harness.Workload
	for _, e := range envs {
		w := &harness.Workload{Writers: 2, Aggregates: 20, MaxTxRows: 5, Rollback: 0.1, Pause: pause}
		w.Prepare(t, e.Env.Env)
		ws = append(ws, w)
		go func() { errs <- w.Run(ctx, e.Env.Env) }()
	}
	return func() map[string]bool {
		cancel()
		for range envs {
			if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("writers: %v", err)
			}
		}
		out := map[string]bool{}
		for _, w := range ws {
			for id := range w.RolledBack() {
				out[id] = true
			}
		}
		return out
	}
}

// TestFleetGroupSharesPipelines: three replicas of one file and group
// share six pipelines (six databases, writers on all): each runs on
// exactly one replica, and no database ever has two walsenders
// (pg_stat_replication); kill -9 of one replica moves its pipelines to the
// others; SIGTERM of a second hands its pipelines over gracefully (exit
// 0); both start again and take a share. Every pipeline's events read
// back to the end offsets: lost 0, in order per aggregate, duplicates
// reported.
func TestFleetGroupSharesPipelines(t *testing.T) {
	t.Parallel()
	file, envs, _ := groupBed(t)
	rs := []*replica{startReplica(t, envs[0], file, "r1"), startReplica(t, envs[0], file, "r2"), startReplica(t, envs[0], file, "r3")}
	stop := make(chan struct{})
	twice := streamedByTwo(t, envs, stop)
	owner := groupSpread(t, "every pipeline to stream on one replica of three", rs, envs)
	wait := writeAsync(t, envs, 100*time.Millisecond)

	// kill -9 of the replica that runs the most.
	count := map[string]int{}
	for _, o := range owner {
		count[o]++
	}
	victim := rs[0]
	for _, r := range rs {
		if count[r.name] > count[victim.name] {
			victim = r
		}
	}
	killed := time.Now()
	victim.p.Kill()
	live := []*replica{}
	for _, r := range rs {
		if r != victim {
			live = append(live, r)
		}
	}
	groupSpread(t, fmt.Sprintf("the %d pipelines of %s (killed) to stream on the other two", count[victim.name], victim.name), live, envs)
	t.Logf("FIGURES kill_to_streaming_elsewhere_s=%.1f pipelines_moved=%d", time.Since(killed).Seconds(), count[victim.name])

	// SIGTERM of a second: a graceful handover.
	second := live[0]
	termed := time.Now()
	if code := second.p.Stop(time.Minute); code != 0 {
		t.Errorf("replica %s: exit code %d after SIGTERM, want 0", second.name, code)
	}
	if !strings.Contains(second.p.Log(), `"msg":"pipelines released"`) || strings.Contains(second.p.Log(), "aborting") {
		t.Errorf("replica %s did not release its pipelines gracefully:\n%s", second.name, second.p.Log())
	}
	groupSpread(t, "every pipeline to stream on the last replica", live[1:], envs)
	t.Logf("FIGURES sigterm_to_streaming_elsewhere_s=%.1f", time.Since(termed).Seconds())

	// Both again, one after the other: a scale-out from 1 to 2, then from
	// 2 to 3 replicas; count the pipelines each moves.
	back := live[1:]
	owner = map[string]string{}
	for _, e := range envs {
		owner[e.name] = back[0].name
	}
	for _, name := range []string{victim.name, second.name} {
		back = append(back, startReplica(t, envs[0], file, name))
		now := groupSpread(t, fmt.Sprintf("every pipeline to stream on one replica of %d", len(back)), back, envs)
		moved := 0
		for p, o := range now {
			if o != owner[p] {
				moved++
			}
		}
		t.Logf("FIGURES scale_out_%d_to_%d_moved=%d of %d", len(back)-1, len(back), moved, len(envs))
		owner = now
	}
	if n := strings.Count(back[0].p.Log(), `"msg":"pipelines released"`); n < 2 {
		t.Errorf("replica %s released pipelines %d times, want 2 at least (once per scale-out):\n%s", back[0].name, n, back[0].p.Log())
	}
	rolledBack := wait()
	close(stop)
	if n, samples := twice(); n > 0 || samples == 0 {
		t.Errorf("pg_stat_replication: %d of %d samples found a database with two walsenders", n, samples)
	}
	total := 0
	for _, e := range envs {
		n, v := readBack(t, e, rolledBack, true)
		total += v.Duplicates
		t.Logf("FIGURES pipeline=%s events=%d duplicates=%d", e.name, n, v.Duplicates)
	}
	t.Logf("FIGURES duplicates_total=%d", total)
	for _, r := range back {
		if code := r.p.Stop(time.Minute); code != 0 {
			t.Errorf("replica %s: exit code %d after SIGTERM, want 0", r.name, code)
		}
	}
}

// TestFleetGroupRefusesAnotherFile: a replica whose file differs from the
// group's (another pipeline count, or the same count with other
// settings) is refused at the start: exit 2, with the fix; so is a
// replica's name with a space (walrelay status prints it in a column).
func TestFleetGroupRefusesAnotherFile(t *testing.T) {
	t.Parallel()
	// N.B. a session long enough for make test, whose load can stall
	// Kafka past the default 10 s: the first replica keeps its pipelines.
	file, envs, vars := groupBedSession(t, "40s")
	first := startReplica(t, envs[0], file, "r1")
	groupSpread(t, "every pipeline to stream on the first replica", []*replica{first}, envs)
	dir := t.TempDir()
	fewer := e2etest.WriteFile(t, dir, "fewer.yaml", []byte(groupFile(vars, groupPipelines[:5])))
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	other := e2etest.WriteFile(t, dir, "other.yaml", []byte(strings.Replace(string(b), "status-interval: 1s", "status-interval: 2s", 1)))
	for _, tc := range []struct{ name, path, want string }{
		{"fewer pipelines", fewer, "has 6 partitions, one per pipeline of the group's file, and this file has 5 pipelines"},
		{"other settings", other, "differ from those of the file group"},
	} {
		code, out := e2etest.RunFor(t, time.Minute, nil, "run", "--config", tc.path, "--fleet-instance", "r2")
		if code != 2 || !strings.Contains(out, tc.want) || !strings.Contains(out, "kafka-topics.sh --delete --topic walrelay-fleet-"+vars["GROUP"]) {
			t.Errorf("%s: exit code %d, want 2 with %q and the fix:\n%s", tc.name, code, tc.want, out)
		}
	}
	if code, out := e2etest.RunFor(t, time.Minute, nil, "run", "--config", file, "--fleet-instance", "r 2"); code != 2 || !strings.Contains(out, `--fleet-instance "r 2": want a name without spaces`) {
		t.Errorf("--fleet-instance with a space: exit code %d, want 2 and the fix:\n%s", code, out)
	}
	if owned := (&replica{name: "r1", p: first.p}).owned(t); len(owned) != len(groupPipelines) {
		t.Errorf("the first replica runs %v after the refusals, want all %d", owned, len(groupPipelines))
	}
	if code := first.p.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// handover is one slot's position where a replica stopped streaming it
// gracefully (its final status update) or began to (START_REPLICATION),
// from the replicas' logs.
type handover struct {
	at      time.Time
	replica string
	stopped bool // false: began
	lsn     string
}

// slotLog reads from rs's logs where each slot stopped and began streaming.
func slotLog(t *testing.T, rs []*replica) map[string][]handover {
	t.Helper()
	out := map[string][]handover{}
	for _, r := range rs {
		for _, line := range strings.Split(r.p.Log(), "\n") {
			var l struct {
				TS, Msg, Slot, LSN string
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Slot == "" || l.Msg != "stopped" && l.Msg != "streaming" {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, l.TS)
			if err != nil {
				t.Fatalf("%s's log: ts %q: %v", r.name, l.TS, err)
			}
			out[l.Slot] = append(out[l.Slot], handover{at: at, replica: r.name, stopped: l.Msg == "stopped", lsn: l.LSN})
		}
	}
	for _, hs := range out {
		slices.SortFunc(hs, func(a, b handover) int { return a.at.Compare(b.at) })
	}
	return out
}

// releasedAt samples pg_replication_slots until stop and returns, per
// slot of envs, the confirmed_flush_lsn of each sample that found it
// released (no active_pid): between two owners, where the next resumes.
func releasedAt(t *testing.T, envs []*fleetEnv, stop <-chan struct{}) func() map[string]map[string]bool {
	var slots []string
	for _, e := range envs {
		slots = append(slots, e.Slot)
	}
	conn, err := pgx.Connect(context.Background(), envs[0].DSN)
	if err != nil {
		t.Fatalf("connect to sample pg_replication_slots: %v", err)
	}
	out := map[string]map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close(context.Background())
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			rows, err := conn.Query(context.Background(), `SELECT slot_name, confirmed_flush_lsn::text FROM pg_replication_slots
				WHERE slot_name = ANY($1) AND active_pid IS NULL`, slots)
			if err != nil {
				continue
			}
			for rows.Next() {
				var slot, lsn string
				if rows.Scan(&slot, &lsn) == nil {
					if out[slot] == nil {
						out[slot] = map[string]bool{}
					}
					out[slot][lsn] = true
				}
			}
			rows.Close()
		}
	}()
	return func() map[string]map[string]bool {
		<-done
		return out
	}
}

// TestFleetGroupHandoverResendsNothing: replicas that join (two at once,
// then one) and leave (SIGTERM) while writers run on every database hand
// their pipelines over gracefully: each new owner resumes at the slot
// position the old one confirmed last (both logged, and PostgreSQL's log
// says where each session of the slot resumed; pg_replication_slots'
// confirmed_flush_lsn at the end is past them),
// no database ever has two walsenders, and every pipeline's events read
// back to the end offsets once each: duplicates 0. /readyz/NAME answers
// 200 on the owner, 503 on the others (with the owner's group), 404 for a
// name the file lacks.
func TestFleetGroupHandoverResendsNothing(t *testing.T) {
	t.Parallel()
	file, envs, vars := groupBed(t)
	// N.B. PostgreSQL's log is at hand on the bed's own server only (not
	// on an external one, WALRELAY_TEST_PG_URL).
	pgLog := envs[0].Bed.PGLogPath() != ""
	var logFrom int64
	if pgLog {
		logFrom = harness.LogOffset(t, envs[0].Env.Env)
	}
	stop := make(chan struct{})
	twice := streamedByTwo(t, envs, stop)
	released := releasedAt(t, envs, stop)
	r1 := startReplica(t, envs[0], file, "r1")
	owner := groupSpread(t, "every pipeline to stream on r1", []*replica{r1}, envs)
	wait := writeAsync(t, envs, 10*time.Millisecond)
	all := []*replica{r1}
	moved := func(what string, rs []*replica) {
		t.Helper()
		now := groupSpread(t, what, rs, envs)
		n := 0
		for p, o := range now {
			if o != owner[p] {
				n++
			}
		}
		t.Logf("FIGURES %s: moved=%d of %d", what, n, len(envs))
		owner = now
	}
	// Two join at once: the cooperative rebalance revokes from r1 and
	// assigns while a second join is under way.
	r2, r3 := startReplica(t, envs[0], file, "r2"), startReplica(t, envs[0], file, "r3")
	all = append(all, r2, r3)
	moved("scale-out 1 to 3 (two at once)", []*replica{r1, r2, r3})
	for _, e := range envs {
		for _, r := range []*replica{r1, r2, r3} {
			code, body := r.p.Get("/readyz/" + e.name)
			switch {
			case owner[e.name] == r.name && code != 200:
				t.Errorf("%s /readyz/%s: %d %q, want 200 (it streams there)", r.name, e.name, code, body)
			case owner[e.name] != r.name && (code != 503 || !strings.Contains(body, "runs on another replica of group "+vars["GROUP"])):
				t.Errorf("%s /readyz/%s: %d %q, want 503: another replica runs it", r.name, e.name, code, body)
			}
		}
	}
	if code, body := r1.p.Get("/readyz/nosuch"); code != 404 || !strings.Contains(body, `no pipeline "nosuch"`) {
		t.Errorf("/readyz/nosuch: %d %q, want 404", code, body)
	}
	// One leaves, gracefully; it comes back (a scale-out from 2 to 3).
	if code := r2.p.Stop(time.Minute); code != 0 {
		t.Errorf("r2: exit code %d after SIGTERM, want 0", code)
	}
	moved("scale-in 3 to 2 (SIGTERM)", []*replica{r1, r3})
	r2b := startReplica(t, envs[0], file, "r2")
	all = append(all, r2b)
	moved("scale-out 2 to 3", []*replica{r1, r2b, r3})

	rolledBack := wait()
	total := readBackAll(t, envs, rolledBack)
	close(stop)
	if n, samples := twice(); n > 0 || samples == 0 {
		t.Errorf("pg_stat_replication: %d of %d samples found a database with two walsenders", n, samples)
	}
	for _, r := range []*replica{r1, r2b, r3} {
		if code := r.p.Stop(time.Minute); code != 0 {
			t.Errorf("replica %s: exit code %d after SIGTERM, want 0", r.name, code)
		}
	}
	// Each handover: the new owner began where the old one stopped, and
	// PostgreSQL says so too (its walsender's "Streaming transactions
	// committing after X"); pg_replication_slots, when a sample caught the
	// slot released in between, showed that position confirmed.
	handovers, seen := 0, 0
	free := released()
	for _, e := range envs {
		hs := slotLog(t, all)[e.Slot]
		resumed := map[string]bool{}
		if pgLog {
			for _, lsn := range harness.PGResumePositions(t, e.Env.Env, logFrom) {
				resumed[lsn.String()] = true
			}
		}
		var last *handover
		for i := range hs {
			h := &hs[i]
			if !h.stopped && last != nil {
				handovers++
				if h.lsn != last.lsn || pgLog && !resumed[last.lsn] {
					t.Errorf("slot %s: %s began at %s, but %s stopped (confirmed last) at %s; PostgreSQL resumed sessions after %v", e.Slot, h.replica, h.lsn, last.replica, last.lsn, resumed)
				}
				if free[e.Slot][last.lsn] {
					seen++
				}
			}
			if h.stopped {
				last = h
			} else {
				last = nil
			}
		}
		var steps []string
		for _, h := range hs {
			what := "began"
			if h.stopped {
				what = "stopped"
			}
			steps = append(steps, h.replica+" "+what+" "+h.lsn)
		}
		confirmed := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
		t.Logf("FIGURES slot=%s sessions=[%s] pg_replication_slots.confirmed_flush_lsn=%s", e.Slot, strings.Join(steps, ", "), confirmed)
	}
	t.Logf("FIGURES graceful_handovers=%d released_slot_sampled_at_that_position=%d duplicates_total=%d", handovers, seen, total)
	if handovers == 0 {
		t.Errorf("no graceful handover logged")
	}
}

// TestFleetGroupLostSessionResendsNothing: a replica that loses its group
// session while its pipelines stream (SIGSTOP past the session timeout;
// the other replica is assigned its pipelines and waits for their slots;
// SIGCONT: the group answers it UNKNOWN_MEMBER_ID, franz-go calls the
// partitions lost) stops them gracefully, drained and confirmed, as on a
// revocation: the other replica resumes each where it confirmed last, and
// every pipeline's events read back once each: duplicates 0.
func TestFleetGroupLostSessionResendsNothing(t *testing.T) {
	t.Parallel()
	file, envs, _ := groupBed(t)
	r1, r2 := startReplica(t, envs[0], file, "r1"), startReplica(t, envs[0], file, "r2")
	owner := groupSpread(t, "every pipeline to stream on one replica of two", []*replica{r1, r2}, envs)
	wait := writeAsync(t, envs, 10*time.Millisecond)
	for _, e := range envs {
		e.c.WaitFor(50, time.Minute)
	}
	frozen := 0
	for _, o := range owner {
		if o == r1.name {
			frozen++
		}
	}
	if err := syscall.Kill(r1.p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// N.B. r2 is assigned r1's pipelines once r1's session expires; it
	// waits for their slots, which r1's walsenders hold.
	harness.WaitFor(t, time.Minute, "r2 to be assigned every pipeline", func() bool { return len(r2.owned(t)) == len(envs) })
	if err := syscall.Kill(r1.p.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	groupSpread(t, "every pipeline to stream again", []*replica{r1, r2}, envs)
	if !strings.Contains(r1.p.Log(), `"msg":"pipelines released"`) {
		t.Errorf("r1 did not log its pipelines released:\n%s", r1.p.Log())
	}
	rolledBack := wait()
	total := readBackAll(t, envs, rolledBack)
	t.Logf("FIGURES lost_session_pipelines=%d duplicates_total=%d", frozen, total)
	for _, r := range []*replica{r1, r2} {
		if code := r.p.Stop(time.Minute); code != 0 {
			t.Errorf("replica %s: exit code %d after SIGTERM, want 0", r.name, code)
		}
	}
}
