package fault

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// The TestCluster scenarios run walrelay against a Kafka cluster of three
// brokers and three KRaft controllers (testbed.GetCluster: replication
// factor 3, min.insync.replicas 2, no unclean leader election) and fail its
// nodes. Each reports, per fault, how long walrelay took to resume: until
// the slot's confirmed position moved again ("moved") and until it passed
// the WAL position of the moment the fault struck or ended ("caught_up"),
// that is, everything in flight then was acknowledged.

// clusterScenario is a scenario on a cluster; walrelay creates the topics.
func clusterScenario(t *testing.T, events int) (*scenario, *testbed.Bed) {
	t.Helper()
	b := testbed.GetCluster(t)
	if n := len(b.BrokerIDs()); n < testbed.ClusterReplicationFactor {
		t.Fatalf("the cluster has %d brokers, the scenarios need %d", n, testbed.ClusterReplicationFactor)
	}
	s := newScenarioOn(t, b, defaultWorkload(events))
	// N.B. registered after the scenario's own cleanups, so it runs first:
	// the brokers of a shared cluster then need not load the test's
	// partitions when a later test restarts them.
	t.Cleanup(func() {
		if !t.Failed() {
			b.DeleteTopics(t, s.e.Topics()...)
		}
	})
	return s, b
}

// started waits until walrelay has created the test's topics and checks that
// they got the cluster's replication factor (walrelay passes -1, the
// broker's default.replication.factor) with every replica in sync.
func (s *scenario) started(b *testbed.Bed, relay *harness.Relay) {
	s.t.Helper()
	s.waitCommitted(500, relay)
	topics := s.e.Topics()
	harness.WaitFor(s.t, time.Minute, "walrelay to create the topics", func() bool {
		for _, m := range b.EndOffsets(s.t, topics...) {
			if len(m) == 0 {
				return false
			}
		}
		return len(b.EndOffsets(s.t, topics...)) == len(topics)
	})
	for _, p := range b.Partitions(s.t, topics...) {
		if len(p.Replicas) != testbed.ClusterReplicationFactor {
			s.t.Errorf("%s/%d has replicas %v: walrelay created it with replication factor %d, want the cluster's %d",
				p.Topic, p.Partition, p.Replicas, len(p.Replicas), testbed.ClusterReplicationFactor)
		}
	}
	b.WaitInSync(s.t, time.Minute, topics...)
}

// busiestLeader returns the broker leading the partitions of the test's
// topics that hold the most records.
func (s *scenario) busiestLeader(b *testbed.Bed) int32 {
	s.t.Helper()
	ends := b.EndOffsets(s.t, s.e.Topics()...)
	load := map[int32]int64{}
	for _, p := range b.Partitions(s.t, s.e.Topics()...) {
		if p.Leader >= 0 {
			load[p.Leader] += ends[p.Topic][p.Partition]
		}
	}
	best := int32(-1)
	for id, n := range load {
		if best < 0 || n > load[best] || (n == load[best] && id < best) {
			best = id
		}
	}
	if best < 0 {
		s.t.Fatalf("no partition of %v has a leader", s.e.Topics())
	}
	return best
}

// resumed waits until walrelay's confirmed position moved past was and
// reached at, and returns how long after since each happened.
func (s *scenario) resumed(relay *harness.Relay, since time.Time, was, at pglogrepl.LSN, what string) (moved, caught time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		if relay.Exited() {
			s.t.Fatalf("walrelay exited after %s", what)
		}
		c := s.e.Bed.Slot(s.t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN
		if moved == 0 && c > was {
			moved = time.Since(since)
		}
		if c >= at {
			if moved == 0 {
				moved = time.Since(since)
			}
			return moved.Round(100 * time.Millisecond), time.Since(since).Round(100 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("walrelay has not confirmed %s (at %s, was %s) 4 minutes after %s", at, c, was, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *scenario) confirmed() pglogrepl.LSN {
	return s.e.Bed.Slot(s.t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN
}

func (s *scenario) wal() pglogrepl.LSN { return s.e.Bed.CurrentWALLSN(s.t, s.e.DSN) }

// TestClusterLeaderKill9: the broker leading the busiest partitions of the
// test's topics is killed with SIGKILL while walrelay produces to it, again
// and again (each time restarted and back in sync before the next): the
// controller elects new leaders from the in-sync replicas and walrelay's
// idempotent producer carries on there.
func TestClusterLeaderKill9(t *testing.T) {
	kills := scale(3, 30)
	s, b := clusterScenario(t, scale(20000, 300000))
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()
	s.started(b, relay)

	slice := s.events / kills
	var moved, caught []time.Duration
	victims := map[int32]int{}
	for i := 0; i < kills; i++ {
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		victim := s.busiestLeader(b)
		victims[victim]++
		in := s.faults.Begin("kill-9-leader")
		was := s.confirmed()
		b.KillKafkaNode(t, victim)
		struck, at := time.Now(), s.wal()
		m, c := s.resumed(relay, struck, was, at, fmt.Sprintf("kill -9 of broker %d", victim))
		moved, caught = append(moved, m), append(caught, c)
		b.StartKafkaNode(t, victim)
		b.WaitInSync(t, 2*time.Minute, s.e.Topics()...)
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES kills=%d victims=%v moved_after=%v caught_up_after=%v max_caught_up=%s events=%d duplicates=%d",
		kills, victims, moved, caught, slices.Max(caught), rep.Events, rep.Duplicates)
}

// TestClusterControllerKill9: the active controller is killed with SIGKILL;
// the two remaining voters elect a new one while walrelay keeps producing.
// Then, with the new controller, the busiest leader is killed too: its
// partitions need the new controller to get new leaders.
func TestClusterControllerKill9(t *testing.T) {
	kills := scale(1, 5)
	s, b := clusterScenario(t, scale(15000, 100000))
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()
	s.started(b, relay)

	slice := s.events / kills
	var elected, ctrlCaught, leaderCaught []time.Duration
	for i := 0; i < kills; i++ {
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice/2)), relay)
		ctrl := b.ActiveController(t)
		in := s.faults.Begin("kill-9-controller")
		was := s.confirmed()
		b.KillKafkaNode(t, ctrl)
		struck, at := time.Now(), s.wal()
		next := ctrl
		harness.WaitFor(t, 2*time.Minute, "a new active controller", func() bool {
			next = b.ActiveController(t)
			return next != ctrl
		})
		elected = append(elected, time.Since(struck).Round(100*time.Millisecond))
		_, c := s.resumed(relay, struck, was, at, fmt.Sprintf("kill -9 of the active controller %d", ctrl))
		ctrlCaught = append(ctrlCaught, c)

		victim := s.busiestLeader(b)
		was = s.confirmed()
		b.KillKafkaNode(t, victim)
		struck, at = time.Now(), s.wal()
		_, c = s.resumed(relay, struck, was, at, fmt.Sprintf("kill -9 of broker %d under the new controller %d", victim, next))
		leaderCaught = append(leaderCaught, c)

		b.StartKafkaNode(t, ctrl)
		b.StartKafkaNode(t, victim)
		b.WaitInSync(t, 2*time.Minute, s.e.Topics()...)
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES controller_kills=%d new_controller_after=%v caught_up_after_controller_kill=%v caught_up_after_leader_kill=%v events=%d duplicates=%d",
		kills, elected, ctrlCaught, leaderCaught, rep.Events, rep.Duplicates)
}

// TestClusterBrokerCutOff: walrelay reaches each broker through a proxy of
// its own (metadata rewritten, so it never bypasses them); the proxy of the
// busiest leader cuts walrelay off from it (open connections reset, new ones
// unanswered) while the other brokers serve and the cluster itself, which
// does not pass the proxies, sees nothing wrong: that broker stays leader.
// walrelay holds the slot at the first record it cannot deliver, and
// delivers everything once the cut heals.
func TestClusterBrokerCutOff(t *testing.T) {
	cuts := scale(2, 10)
	down := scale(15*time.Second, 45*time.Second)
	s, b := clusterScenario(t, scale(20000, 150000))
	brokers := b.Brokers()
	proxies := harness.NewKafkaClusterProxies(t, brokers)
	relay := s.e.StartRelay(t, "--brokers", strings.Join(harness.ProxyAddrs(proxies), ","))
	relay.WaitStreaming()
	s.write()
	s.started(b, relay)
	peers, err := harness.TCPPeers(relay.Pid())
	if err != nil {
		t.Fatal(err)
	}
	for _, br := range brokers {
		if slices.Contains(peers, br) {
			t.Fatalf("walrelay connects to the broker %s directly (peers %v): the proxies are bypassed", br, peers)
		}
	}

	slice := s.events / cuts
	var stalled []string
	var moved, caught []time.Duration
	for i := 0; i < cuts; i++ {
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice/2)), relay)
		victim := s.busiestLeader(b)
		proxy := proxies[slices.Index(brokers, b.BrokerAddr(t, victim))]
		in := s.faults.Begin("broker-cut-off")
		before := s.confirmed()
		heal := proxy.Isolate()
		time.Sleep(down / 2)
		half := s.confirmed()
		time.Sleep(down - down/2)
		if relay.Exited() {
			t.Fatalf("walrelay exited while broker %d was cut off", victim)
		}
		// N.B. the slot stops at the first record for the cut-off broker's
		// partitions: it may move after the cut by what was acknowledged
		// before it, then not any more.
		during := s.confirmed()
		stalled = append(stalled, fmt.Sprintf("broker%d:+%dB,+%dB", victim, uint64(half-min(half, before)), uint64(during-min(during, half))))
		for _, p := range b.Partitions(t, s.e.Topics()...) {
			if p.Leader < 0 {
				t.Errorf("%s/%d has no leader while only walrelay's connection to broker %d is cut", p.Topic, p.Partition, victim)
			}
		}
		heal()
		healed, at := time.Now(), s.wal()
		m, c := s.resumed(relay, healed, during, at, fmt.Sprintf("broker %d cut off for %s", victim, down))
		moved, caught = append(moved, m), append(caught, c)
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	conns, made, seen := harness.ProxyAddrs(proxies), 0, 0
	for _, p := range proxies {
		_, n, kinds := p.Stats()
		made += n
		seen += kinds["produce"]
	}
	t.Logf("FIGURES cuts=%d down=%s confirmed_moved_first_half,second_half=%v moved_after_heal=%v caught_up_after_heal=%v proxies=%v proxy_cuts=%d produce_requests=%d events=%d duplicates=%d",
		cuts, down, stalled, moved, caught, conns, made, seen, rep.Events, rep.Duplicates)
}

// TestClusterRollingRestart: the three brokers are restarted one after the
// other (clean stop, start, back in sync before the next) while walrelay
// produces, the way an operator upgrades a cluster.
func TestClusterRollingRestart(t *testing.T) {
	rounds := scale(1, 3)
	s, b := clusterScenario(t, scale(15000, 150000))
	relay := s.e.StartRelay(t)
	relay.WaitStreaming()
	s.write()
	s.started(b, relay)

	ids := b.BrokerIDs()
	slice := s.events / (rounds * len(ids))
	var caught []time.Duration
	var took []time.Duration
	n := 0
	for r := 0; r < rounds; r++ {
		for _, id := range ids {
			s.waitCommitted(int64(n*slice+s.rng.IntN(slice/2)), relay)
			n++
			in := s.faults.Begin("restart-broker")
			was := s.confirmed()
			began, at := time.Now(), s.wal()
			b.StopKafkaNode(t, id)
			// N.B. measured while the broker is down: its clean shutdown
			// moved its leaderships to the other two.
			_, c := s.resumed(relay, began, was, at, fmt.Sprintf("clean stop of broker %d", id))
			caught = append(caught, c)
			b.StartKafkaNode(t, id)
			b.WaitInSync(t, 2*time.Minute, s.e.Topics()...)
			took = append(took, time.Since(began).Round(100*time.Millisecond))
			in.End()
		}
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES restarts=%d stop_to_back_in_sync=%v caught_up_after_stop=%v events=%d duplicates=%d", n, took, caught, rep.Events, rep.Duplicates)
}

// TestClusterBelowMinISR: two of the three brokers are killed with SIGKILL,
// which leaves every partition one in-sync replica, below
// min.insync.replicas: Kafka refuses the records (NOT_ENOUGH_REPLICAS,
// retriable). walrelay waits without restarting its pipeline, confirms no
// transaction committed after the kills (read from pg_replication_slots
// against the witness slot's commit ends while they are down), and delivers
// everything once the brokers return.
func TestClusterBelowMinISR(t *testing.T) {
	belowMinISR(t, scale(20*time.Second, 60*time.Second), "")
}

// TestClusterBelowMinISRPastDeliveryTimeout is TestClusterBelowMinISR with
// the brokers down longer than walrelay's delivery timeout: the records
// finally fail, walrelay discards its Kafka client and restarts from the
// last confirmed position, again and again, and still confirms nothing past
// what Kafka acknowledged; once the brokers return it delivers everything.
func TestClusterBelowMinISRPastDeliveryTimeout(t *testing.T) {
	belowMinISR(t, scale(30*time.Second, 90*time.Second), "10s")
}

func belowMinISR(t *testing.T, down time.Duration, deliveryTimeout string) {
	outages := scale(1, 3)
	s, b := clusterScenario(t, scale(15000, 120000))
	var args []string
	if deliveryTimeout != "" {
		args = append(args, "--kafka-delivery-timeout", deliveryTimeout)
	}
	relay := s.e.StartRelay(t, args...)
	relay.WaitStreaming()
	s.write()
	s.started(b, relay)

	ids := b.BrokerIDs()
	slice := s.events / (outages + 1)
	var moved, caught []time.Duration
	var checked, restarts []int
	for i := 0; i < outages; i++ {
		s.waitCommitted(int64(i*slice+slice/2+s.rng.IntN(slice/2)), relay)
		victims := []int32{ids[i%len(ids)], ids[(i+1)%len(ids)]}
		logBefore := len(relay.Log())
		in := s.faults.Begin("isr-below-min")
		for _, id := range victims {
			b.KillKafkaNode(t, id)
		}
		killed, afterKill := time.Now(), s.wal()
		below := false
		pending := 0
		var held pglogrepl.LSN
		for time.Since(killed) < down {
			time.Sleep(2 * time.Second)
			if relay.Exited() {
				t.Fatalf("walrelay exited while %v were down", victims)
			}
			// N.B. nothing committed after the kills can have been
			// acknowledged: no partition has two replicas in sync.
			held = s.confirmed()
			ends := s.wit.CommitEnds(t)
			var first pglogrepl.LSN
			pending = 0
			for _, end := range ends {
				if end > afterKill {
					pending++
					if first == 0 || end < first {
						first = end
					}
				}
			}
			if first != 0 && held >= first {
				t.Fatalf("confirmed_flush_lsn %s is at or past %s, the commit end of a transaction committed after brokers %v were killed (WAL then at %s): it cannot have been acknowledged",
					held, first, victims, afterKill)
			}
			isr := true
			for _, p := range b.Partitions(t, s.e.Topics()...) {
				isr = isr && len(p.ISR) < testbed.ClusterMinISR
			}
			below = below || isr
		}
		if !below {
			t.Errorf("while brokers %v were down, the partitions never all had fewer than %d replicas in sync", victims, testbed.ClusterMinISR)
		}
		if pending == 0 {
			t.Errorf("no transaction was committed while brokers %v were down: the check of the confirmed position meant nothing", victims)
		}
		checked = append(checked, pending)
		n := strings.Count(relay.Log()[logBefore:], "restarting from the last confirmed position")
		restarts = append(restarts, n)
		switch {
		case deliveryTimeout == "" && n > 0:
			t.Errorf("walrelay restarted its pipeline while brokers %v were down for %s (under its delivery timeout): it should have waited", victims, down)
		case deliveryTimeout != "" && n == 0:
			t.Errorf("walrelay did not restart its pipeline while brokers %v were down for %s, past its delivery timeout %s", victims, down, deliveryTimeout)
		}
		// N.B. the first broker back gives the partitions it catches up on
		// two in-sync replicas again: the resume is measured from it.
		b.StartKafkaNode(t, victims[0])
		back, at := time.Now(), s.wal()
		m, c := s.resumed(relay, back, held, at, fmt.Sprintf("broker %d returning", victims[0]))
		moved, caught = append(moved, m), append(caught, c)
		b.StartKafkaNode(t, victims[1])
		b.WaitInSync(t, 2*time.Minute, s.e.Topics()...)
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	t.Logf("FIGURES outages=%d down=%s delivery_timeout=%s pipeline_restarts=%v unconfirmed_transactions_checked=%v moved_after_first_return=%v caught_up_after_first_return=%v events=%d duplicates=%d",
		outages, down, cmp.Or(deliveryTimeout, "2m"), restarts, checked, moved, caught, rep.Events, rep.Duplicates)
}
