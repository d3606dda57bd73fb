package fault

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// groupReplica is one walrelay of TestFleetGroupFaults.
type groupReplica struct {
	name string
	p    *harness.Relay
}

// running is what r's /pipelines says it streams.
func (r *groupReplica) streaming(t *testing.T) map[string]bool {
	t.Helper()
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + r.p.HTTPAddr() + "/pipelines")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list []map[string]any
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, s := range list {
		if s["state"] == "streaming" && s["owner"] == r.name {
			out[s["name"].(string)] = true
		}
	}
	return out
}

// TestFleetGroupFaults: twelve pipelines (twelve databases, writers on
// all) on three replicas of one group; kill -9 of one replica, a Kafka
// broker restart, kill -9 of a second, both back. Every pipeline's events
// read back and checked by the invariant checker (lost 0, order 0,
// duplicates reported); no database ever has two walsenders
// (pg_stat_replication); the time from a replica's death to its pipelines
// streaming elsewhere is reported.
func TestFleetGroupFaults(t *testing.T) {
	testbed.Disrupt(t)
	const n = 12
	dir := t.TempDir()
	uniq := harness.Uniq()
	var b strings.Builder
	fmt.Fprintf(&b, "brokers: %s\nhttp-addr: 127.0.0.1:0\ngroup: g%s\ndefaults:\n  table: public.outbox\n  header-columns: type:eventType\n  topic-partitions: 3\n  status-interval: 1s\n  shutdown-timeout: 10s\npipelines:\n", strings.Join(testbed.Get(t).Brokers(), ","), uniq)
	var ss []*scenario
	var names, dbs []string
	for i := range n {
		w := &harness.Workload{Writers: 1, Events: scale(150, 3000), Aggregates: 10, MaxTxRows: 5, Rollback: 0.1, Pause: 50 * time.Millisecond}
		s := newScenario(t, w)
		ss = append(ss, s)
		name := fmt.Sprintf("p%02d", i+1)
		names = append(names, name)
		url := filepath.Join(dir, name+".url")
		if err := os.WriteFile(url, []byte(s.e.DSN), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  - name: %s\n    pg-url-file: %s\n    slot: %s\n    publication: %s\n", name, url, s.e.Slot, s.e.Pub)
		var db string
		if err := s.e.Bed.QueryRow(t, s.e.DSN, "SELECT current_database()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var started []*groupReplica
	start := func(name string) *groupReplica {
		r := &groupReplica{name: name, p: harness.StartProcess(t, relayBin, nil, []string{"run", "--config", file, "--fleet-instance", name})}
		started = append(started, r)
		return r
	}
	// spread waits until every pipeline streams on exactly one of rs, each
	// of rs running one at least, and returns the owners.
	spread := func(what string, rs []*groupReplica) map[string]string {
		t.Helper()
		var owner map[string]string
		harness.WaitFor(t, 3*time.Minute, what, func() bool {
			owner = map[string]string{}
			runs := map[string]bool{}
			for _, r := range rs {
				if r.p.Exited() {
					t.Fatalf("replica %s exited", r.name)
				}
				for name := range r.streaming(t) {
					if o, dup := owner[name]; dup {
						t.Fatalf("pipeline %s streams on %s and %s", name, o, r.name)
					}
					owner[name] = r.name
					runs[r.name] = true
				}
			}
			return len(owner) == n && len(runs) == len(rs)
		})
		return owner
	}

	// Two walsenders on one database would be one slot streamed twice.
	stop := make(chan struct{})
	sampled := harness.SampleStreamedTwice(t, ss[0].e.DSN, dbs, stop)

	rs := []*groupReplica{start("r1"), start("r2"), start("r3")}
	owner := spread("every pipeline to stream on one replica of three", rs)
	for _, s := range ss {
		s.write()
	}
	moved := func(from string, owner map[string]string) int {
		k := 0
		for _, o := range owner {
			if o == from {
				k++
			}
		}
		return k
	}
	ss[0].waitCommitted(int64(scale(50, 1000)), nil)
	// begin marks a fault on every pipeline's history (a duplicate within
	// it is explained); the function it returns ends it.
	begin := func(what string) func() {
		var ins []*harness.Injecting
		for _, s := range ss {
			ins = append(ins, s.faults.Begin(what))
		}
		return func() {
			for _, in := range ins {
				in.End()
			}
		}
	}

	// kill -9 of r1.
	end := begin("kill-9 replica r1")
	before := moved("r1", owner)
	killed := time.Now()
	rs[0].p.Kill()
	owner = spread("r1's pipelines to stream on r2 and r3", rs[1:])
	t.Logf("FIGURES kill1_to_streaming_elsewhere_s=%.1f pipelines=%d", time.Since(killed).Seconds(), before)
	end()

	// A broker restart in the middle.
	end = begin("kafka restart")
	ss[0].e.Bed.StopKafka(t)
	for until := time.Now().Add(5 * time.Second); time.Now().Before(until); time.Sleep(250 * time.Millisecond) {
		if rs[1].p.Exited() || rs[2].p.Exited() {
			t.Fatalf("a replica exited while Kafka was down")
		}
	}
	ss[0].e.Bed.StartKafka(t)
	up := time.Now()
	owner = spread("every pipeline to stream on r2 and r3 after Kafka's restart", rs[1:])
	t.Logf("FIGURES kafka_restart_to_streaming_s=%.1f", time.Since(up).Seconds())
	end()

	// kill -9 of r2.
	end = begin("kill-9 replica r2")
	before = moved("r2", owner)
	killed = time.Now()
	rs[1].p.Kill()
	spread("r2's pipelines to stream on r3", rs[2:])
	t.Logf("FIGURES kill2_to_streaming_elsewhere_s=%.1f pipelines=%d", time.Since(killed).Seconds(), before)
	end()

	// Both back.
	back := []*groupReplica{rs[2], start("r1"), start("r2")}
	owner = spread("every pipeline to stream on one replica of three again", back)
	t.Logf("owners at the end: %v", owner)

	dups := 0
	for i, s := range ss {
		rep := s.finish(back[0].p, "pipeline="+names[i])
		dups += rep.Duplicates
	}
	close(stop)
	twice, samples := sampled()
	if twice > 0 || samples == 0 {
		t.Errorf("pg_stat_replication: %d of %d samples found a database with two walsenders", twice, samples)
	}
	t.Logf("FIGURES pipelines=%d duplicates_total=%d pg_stat_replication_samples=%d", n, dups, samples)
	for _, r := range back {
		stopRelay(t, r.p)
	}
	checkHandovers(t, started)
}

// checkHandovers reads from the replicas' logs where each slot stopped
// streaming gracefully (the final status update's position) and where the
// next session began: a graceful handover (a revocation, a lost session,
// SIGTERM) resumes where the old owner confirmed last, or it would relay
// again what it had confirmed. It reports how each replica released its
// pipelines.
func checkHandovers(t *testing.T, rs []*groupReplica) {
	t.Helper()
	type event struct {
		at      time.Time
		replica string
		stopped bool
		lsn     string
	}
	slots := map[string][]event{}
	for _, r := range rs {
		released, aborted, lost := 0, 0, 0
		for _, line := range strings.Split(r.p.Log(), "\n") {
			var l struct {
				TS, Msg, Slot, LSN string
				Aborted            bool
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			switch {
			case l.Msg == "pipelines released" && l.Aborted:
				aborted++
			case l.Msg == "pipelines released":
				released++
			case strings.HasPrefix(l.Msg, "group session lost"):
				lost++
			case l.Slot != "" && (l.Msg == "stopped" || l.Msg == "streaming"):
				at, err := time.Parse(time.RFC3339Nano, l.TS)
				if err != nil {
					t.Fatalf("%s's log: ts %q: %v", r.name, l.TS, err)
				}
				slots[l.Slot] = append(slots[l.Slot], event{at, r.name, l.Msg == "stopped", l.LSN})
			}
		}
		t.Logf("FIGURES replica=%s releases_graceful=%d releases_aborted_past_timeout=%d group_sessions_lost=%d", r.name, released, aborted, lost)
	}
	handovers := 0
	for slot, es := range slots {
		slices.SortFunc(es, func(a, b event) int { return a.at.Compare(b.at) })
		for i := 1; i < len(es); i++ {
			if prev, e := es[i-1], es[i]; prev.stopped && !e.stopped {
				handovers++
				if e.lsn != prev.lsn {
					t.Errorf("slot %s: %s began at %s, but %s had stopped gracefully at %s", slot, e.replica, e.lsn, prev.replica, prev.lsn)
				}
			}
		}
	}
	t.Logf("FIGURES graceful_handovers=%d (each resumed where the old owner confirmed last)", handovers)
}
