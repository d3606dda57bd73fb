package fault

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
)

// cutMode is one way the proxy cuts a connection.
type cutMode struct {
	kind  string
	match harness.Matcher // nil: reset every connection at once
}

// cut injects one cut through proxy and returns when it struck.
func cut(t *testing.T, proxy *harness.Proxy, m cutMode) {
	t.Helper()
	if m.match == nil {
		if proxy.CutAll() == 0 {
			t.Fatalf("%s: the proxy had no connection to cut", m.kind)
		}
		return
	}
	select {
	case <-proxy.CutAfter(m.match):
	case <-time.After(30 * time.Second):
		proxy.Disarm()
		t.Fatalf("%s: no such message passed the proxy within 30s", m.kind)
	}
}

// TestPostgresConnectionCuts: walrelay reaches PostgreSQL through a proxy
// that cuts its connections: at random moments, right after the server sent
// a transaction's Commit (walrelay has the whole transaction, nothing of it
// is confirmed), and right after walrelay sent a status update (the
// confirmation reaches the server, the stream ends).
func TestPostgresConnectionCuts(t *testing.T) { postgresConnectionCuts(t, atLeastOnce) }

// TestPostgresConnectionCutsExactlyOnce is TestPostgresConnectionCuts with --exactly-once: no duplicates either.
func TestPostgresConnectionCutsExactlyOnce(t *testing.T) { postgresConnectionCuts(t, exactlyOnce) }

func postgresConnectionCuts(t *testing.T, m mode) {
	t.Parallel()
	// N.B. walrelay's restart backoff doubles (up to 30 s) while attempts
	// last under a minute, so the short version cuts each way once or twice.
	cuts := scale(4, 15)
	modes := []cutMode{
		{"cut", nil},
		{"cut-after-commit", harness.PGCommit},
		{"cut-after-status-update", harness.PGStatusUpdate},
	}
	s := m.in(newScenario(t, defaultWorkload(scale(15000, 150000))))
	proxy := harness.NewPGProxy(t, harness.PGHostPort(t, s.e.DSN))
	relay := s.e.StartRelay(t, "--pg-url", harness.DSNVia(t, s.e.DSN, proxy.Addr(), nil))
	relay.WaitStreaming()
	s.write()

	slice := s.events / cuts
	var recovered []time.Duration
	var received []pglogrepl.LSN // confirmations the server took from a cut status update
	for i := 0; i < cuts; i++ {
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		old := s.e.Walsender(t)
		if old == 0 {
			t.Fatalf("walrelay does not stream before cut %d", i+1)
		}
		m := modes[i%len(modes)]
		in := s.faults.Begin(m.kind)
		if m.kind == "cut-after-status-update" {
			received = append(received, cutAfterStatusUpdate(t, s.e, proxy))
		} else {
			cut(t, proxy, m)
		}
		struck := time.Now()
		harness.WaitFor(t, 2*time.Minute, "walrelay to stream again after "+m.kind, func() bool {
			now := s.e.Walsender(t)
			return now != 0 && now != old
		})
		recovered = append(recovered, time.Since(struck).Round(100*time.Millisecond))
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	conns, made, seen := proxy.Stats()
	t.Logf("FIGURES cuts=%d streaming_again_after=%v proxy_conns=%d proxy_cuts=%d commits_forwarded=%d status_updates_forwarded=%d events=%d duplicates=%d",
		cuts, recovered, conns, made, seen["commit"], seen["status_update"], rep.Events, rep.Duplicates)
	t.Logf("positions confirmed by a status update right before its connection was cut: %v", received)
}

// cutAfterStatusUpdate cuts the connection right after a status update
// that confirms past the slot's position reached the server, and keeps
// walrelay from the server until the slot shows that confirmation: the
// walsender took it before the stream ended. It returns the position
// confirmed.
func cutAfterStatusUpdate(t *testing.T, e *harness.Env, proxy *harness.Proxy) pglogrepl.LSN {
	t.Helper()
	before := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
	var flush pglogrepl.LSN
	// 'd', length(4), 'r', write(8), flush(8), apply(8), time(8), reply(1)
	struck, heal := proxy.CutAfterIsolate(func(dir harness.Dir, msg []byte) bool {
		if !harness.PGStatusUpdate(dir, msg) || len(msg) < 22 {
			return false
		}
		if lsn := pglogrepl.LSN(binary.BigEndian.Uint64(msg[14:])); lsn > before {
			flush = lsn
			return true
		}
		return false
	})
	select {
	case <-struck:
	case <-time.After(time.Minute):
		proxy.Disarm()
		t.Fatalf("cut-after-status-update: no status update confirming past %s passed the proxy within a minute", before)
	}
	defer heal()
	harness.WaitFor(t, time.Minute, fmt.Sprintf("the slot to show the confirmation %s of the cut status update (it was at %s)", flush, before), func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= flush
	})
	return flush
}

// TestKafkaConnectionCuts: walrelay reaches Kafka through a proxy that
// advertises itself as the broker and cuts connections: at random moments
// and right after forwarding a produce request (the broker appends the
// records, the acknowledgement never arrives). The idempotent producer
// retries without writing anything twice.
func TestKafkaConnectionCuts(t *testing.T) { kafkaConnectionCuts(t, atLeastOnce) }

// TestKafkaConnectionCutsExactlyOnce is TestKafkaConnectionCuts with --exactly-once: no duplicates either.
func TestKafkaConnectionCutsExactlyOnce(t *testing.T) { kafkaConnectionCuts(t, exactlyOnce) }

func kafkaConnectionCuts(t *testing.T, m mode) {
	t.Parallel()
	cuts := scale(6, 40)
	modes := []cutMode{
		{"cut", nil},
		{"cut-after-produce", harness.KafkaProduce},
	}
	if m == exactlyOnce {
		// N.B. right after the commit request (the outcome never reaches
		// walrelay) and, after a kill -9, right after the next walrelay's
		// checkpoint read began.
		modes = append(modes, cutMode{"cut-after-end-txn", harness.KafkaEndTxn}, cutMode{"kill-9-cut-after-checkpoint-read", harness.KafkaFetch})
	}
	s := m.in(newScenario(t, defaultWorkload(scale(15000, 200000))))
	broker := s.e.Bed.Brokers()[0]
	proxy := harness.NewKafkaProxy(t, broker)
	relay := s.e.StartRelay(t, "--brokers", proxy.Addr())
	relay.WaitStreaming()
	s.write()

	slice := s.events / cuts
	var appended []string // batches the broker appended whose ack was cut
	for i := 0; i < cuts; i++ {
		s.waitCommitted(int64(i*slice+s.rng.IntN(slice)), relay)
		if i == 0 {
			// N.B. every connection goes through the proxy: the metadata
			// walrelay got names the proxy as the broker.
			peers, err := harness.TCPPeers(relay.Pid())
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(peers, broker) {
				t.Fatalf("walrelay connects to the broker %s directly (peers %v): the proxy is bypassed", broker, peers)
			}
		}
		m := modes[i%len(modes)]
		in := s.faults.Begin(m.kind)
		switch m.kind {
		case "cut-after-produce":
			appended = append(appended, cutAfterProduce(t, s.e, proxy)...)
		case "kill-9-cut-after-checkpoint-read":
			struck := proxy.CutAfter(m.match)
			relay.Kill()
			relay = s.e.StartRelay(t, "--brokers", proxy.Addr())
			select {
			case <-struck:
			case <-time.After(time.Minute):
				proxy.Disarm()
				t.Fatalf("%s: the restarted walrelay sent no fetch request within a minute", m.kind)
			}
		default:
			cut(t, proxy, m)
		}
		at := s.e.Bed.CurrentWALLSN(t, s.e.DSN)
		harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("walrelay to confirm past %s after %s", at, m.kind), func() bool {
			return s.e.Bed.Slot(t, s.e.DSN, s.e.Slot).ConfirmedFlushLSN >= at
		})
		in.End()
	}
	rep := s.finish(relay, "")
	stopRelay(t, relay)
	conns, made, seen := proxy.Stats()
	if seen["produce"] == 0 {
		t.Errorf("no produce request passed the proxy")
	}
	if rep.Duplicates != 0 {
		t.Errorf("%d duplicates: the idempotent producer should have retried the cut requests without writing twice", rep.Duplicates)
	}
	if len(appended) == 0 {
		t.Errorf("no produce request cut after had a batch appended by the broker: no acknowledgement of appended records was lost, which the test is for")
	}
	t.Logf("FIGURES cuts=%d proxy_conns=%d proxy_cuts=%d produce_requests=%d events=%d duplicates=%d acks_lost_of_appended_batches=%d",
		cuts, conns, made, seen["produce"], rep.Events, rep.Duplicates, len(appended))
	t.Logf("batches appended by the broker whose acknowledgement was cut: %v", appended)
}

// cutAfterProduce cuts the connection right after a produce request
// reached the broker and keeps walrelay from the broker until the broker
// shows it appended every batch of that request (or appendWait passed): for
// each, the partition holds at least first sequence + records of the
// batch's producer id and epoch (an idempotent producer numbers a
// partition's records from 0 per epoch, and the broker takes them only in
// sequence). So the retry that follows is of a batch the broker already
// has, and it must not be written twice. It returns the batches seen
// appended, as topic/partition@sequence+records.
func cutAfterProduce(t *testing.T, e *harness.Env, proxy *harness.Proxy) []string {
	t.Helper()
	var req []byte
	struck, heal := proxy.CutAfterIsolate(func(dir harness.Dir, msg []byte) bool {
		if harness.KafkaProduce(dir, msg) {
			req = slices.Clone(msg)
			return true
		}
		return false
	})
	select {
	case <-struck:
	case <-time.After(30 * time.Second):
		proxy.Disarm()
		t.Fatalf("cut-after-produce: no produce request passed the proxy within 30s")
	}
	defer heal()
	batches, err := harness.ParseProduceRequest(req)
	if err != nil {
		t.Fatalf("cut-after-produce: %v", err)
	}
	if len(batches) == 0 {
		t.Fatalf("cut-after-produce: the produce request cut after carries no batch")
	}
	names := topicNames(t, e)
	var out []string
	deadline := time.Now().Add(appendWait)
	for _, b := range batches {
		topic := b.Topic
		if topic == "" {
			topic = names[b.TopicID]
		}
		if topic == "" {
			t.Fatalf("cut-after-produce: the broker has no topic with id %x", b.TopicID)
		}
		want := int64(b.FirstSequence) + int64(b.Records)
		for {
			var got int64
			for _, r := range e.Bed.ConsumeAll(t, []string{topic}, 0) {
				if r.Partition == b.Partition && r.ProducerID == b.ProducerID && r.ProducerEpoch == b.ProducerEpoch {
					got++
				}
			}
			if got >= want {
				out = append(out, fmt.Sprintf("%s/%d@%d+%d", topic, b.Partition, b.FirstSequence, b.Records))
				break
			}
			// N.B. a broker may also refuse a batch it was sent, and its
			// answer is cut with the rest: the test cannot see why. Such a
			// batch is retried as after a plain cut, and the end of the
			// test checks that nothing was lost or written twice. (A CI
			// simulation saw the first batch of a new Kafka transaction,
			// records 0..1 of epoch 70, not appended within a minute.)
			if time.Now().After(deadline) {
				t.Logf("cut-after-produce: the broker did not append the cut batch of %s/%d (producer %d epoch %d, records %d..%d, %d seen) within %s: retried as after a plain cut",
					topic, b.Partition, b.ProducerID, b.ProducerEpoch, b.FirstSequence, want-1, got, appendWait)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return out
}

// appendWait is how long cutAfterProduce waits for the broker to append
// the batches of the produce request it cut after.
const appendWait = 30 * time.Second

// topicNames maps the broker's topic ids to names.
func topicNames(t *testing.T, e *harness.Env) map[[16]byte]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(t.Context())
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	out := map[[16]byte]string{}
	for name, d := range topics {
		out[d.ID] = name
	}
	return out
}
