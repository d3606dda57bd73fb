package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// withSettings adds lines of settings to pipeline name of fleetFile.
func withSettings(name string, lines ...string) func(string) string {
	return func(s string) string {
		var b strings.Builder
		for _, l := range lines {
			b.WriteString("    " + l + "\n")
		}
		return strings.Replace(s, "    slot: "+name+"_", b.String()+"    slot: "+name+"_", 1)
	}
}

// edits applies each edit in turn.
func edits(es ...func(string) string) func(string) string {
	return func(s string) string {
		for _, e := range es {
			s = e(s)
		}
		return s
	}
}

// dropTopics deletes e's topics and waits until Kafka no longer lists
// them: the records of e's pipeline then go to topics that do not exist,
// which Kafka refuses (UNKNOWN_TOPIC_OR_PARTITION) until its pipeline
// restarts and creates them again. e's collector starts anew, on the
// topics to come.
func dropTopics(t *testing.T, e *fleetEnv) {
	t.Helper()
	e.c.Stop()
	e.Bed.DeleteTopics(t, e.Topics()...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	harness.WaitFor(t, time.Minute, fmt.Sprintf("Kafka to delete %v", e.Topics()), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ts, err := adm.ListTopics(ctx, e.Topics()...)
		if err != nil {
			return false
		}
		for _, topic := range e.Topics() {
			if d, ok := ts[topic]; ok && d.Err == nil {
				return false
			}
		}
		return true
	})
	e.c = e.Collect(t)
}

// brokerConns counts the TCP connections walrelay holds to the bed's
// brokers, read from /proc.
func brokerConns(t *testing.T, p *e2etest.Proc) int {
	t.Helper()
	n, err := harness.ConnectionsTo(p.Pid(), p.Env.Bed.Brokers())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFleetSharedClientOneKafkaFault: orders and billing share one Kafka
// producer client (equal settings), shipping has its own (its linger).
// billing's topics are deleted under it: Kafka refuses its records
// (UNKNOWN_TOPIC_OR_PARTITION) until they fail, and billing restarts on a
// new client of its own and creates them again, while orders keeps
// delivering, each of its events exactly once unless billing stopped with
// records still in a produce request (then the shared client is closed and
// orders restarts from its confirmed position: some sent twice, none
// lost). billing then delivers every event written after
// the deletion: lost 0. SIGTERM: exit 0.
// sharedClosed is what walrelay logs when a stopping pipeline's records
// close the shared client (sink.release).
const sharedClosed = "closing the kafka client shared with other pipelines"

func TestFleetSharedClientOneKafkaFault(t *testing.T) {
	t.Parallel()
	p, envs := startFleetWith(t, withSettings("billing", "kafka-delivery-timeout: 6s"))
	orders, billing, shipping := envs[0], envs[1], envs[2]
	for _, e := range envs {
		waitStreaming(t, p, e)
	}
	if !strings.Contains(p.Log(), `"shared":2`) {
		t.Errorf("walrelay did not log two shared producer clients (orders and billing's, shipping's):\n%s", p.Log())
	}
	// billing's topics exist and carry its first events; then they go.
	rolledBack := write(t, 50, orders, billing)
	readBack(t, billing, rolledBack, false)
	before := billing.CommittedRows(t)
	dropTopics(t, billing)

	for id := range write(t, 200, orders, billing) {
		rolledBack[id] = true
	}
	// orders goes on while billing's records are refused. It sends some
	// again only when billing stopped with records still in a produce
	// request: sink.release then closes the client they shared, so that
	// none of billing's reaches Kafka after its next attempt's.
	ordersSentAgain := func() {
		t.Helper()
		if _, v := readBack(t, orders, rolledBack, true); v.Duplicates > 0 && !strings.Contains(p.Log(), sharedClosed) {
			t.Errorf("orders: %d events sent twice, and walrelay did not log %q", v.Duplicates, sharedClosed)
		}
	}
	ordersSentAgain()
	var lastErr string
	harness.WaitFor(t, 2*time.Minute, "billing to fail on its refused records and restart", func() bool {
		lastErr, _ = pipelines(t, p)["billing"]["last_error"].(string)
		return lastErr != ""
	})
	t.Logf("billing's last error: %s", lastErr)
	if !strings.Contains(p.Log(), "kafka client retired after a pipeline's kafka failure") {
		t.Errorf("the log does not say billing's failure retired the client it shared with orders")
	}
	// and after billing's restart (a new client for it, orders' kept).
	for id := range write(t, 200, orders, shipping) {
		rolledBack[id] = true
	}
	ordersSentAgain()
	readBack(t, shipping, rolledBack, false)
	if st := pipelines(t, p); st["orders"]["ready"] != true {
		t.Errorf("/pipelines orders: %v, want ready", st["orders"])
	}

	// billing: every event written after its topics went, at least once.
	end := billing.Bed.CurrentWALLSN(t, billing.DSN)
	harness.WaitFor(t, 2*time.Minute, "billing's slot to confirm its events", func() bool {
		return billing.Bed.Slot(t, billing.DSN, billing.Slot).ConfirmedFlushLSN >= end
	})
	rows := billing.CommittedRows(t)
	for id := range before {
		delete(rows, id) // deleted with the topics
	}
	billing.c.WaitFor(len(rows), 2*time.Minute)
	if v := e2etest.CheckRecords(t, billing.Env, billing.c.ToEnd(), rows, rolledBack, 3, true); v.Lost != 0 {
		t.Errorf("billing lost %d of %d events", v.Lost, len(rows))
	}
	harness.WaitFor(t, 2*time.Minute, "/readyz to answer 200", func() bool { return p.Ready() == 200 })
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestFleetSharedClientConnections: the connections to Kafka of three
// pipelines, first with equal Kafka settings (one shared producer
// client), then each with a linger of its own (one client each, as
// before sharing). The three share one marker store's client in both
// (fleet/markers.go).
func TestFleetSharedClientConnections(t *testing.T) {
	t.Parallel()
	count := func(edit func(string) string) int {
		p, envs := startFleetWith(t, edit)
		for _, e := range envs {
			waitStreaming(t, p, e)
		}
		rolledBack := write(t, 50, envs...)
		for _, e := range envs {
			readBack(t, e, rolledBack, false)
		}
		n := brokerConns(t, p)
		if code := p.Stop(time.Minute); code != 0 {
			t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
		}
		return n
	}
	equal := strings.NewReplacer("    kafka-linger: 10ms\n", "").Replace
	shared := count(equal)
	own := count(edits(equal, withSettings("orders", "kafka-linger: 1ms"), withSettings("billing", "kafka-linger: 2ms"), withSettings("shipping", "kafka-linger: 3ms")))
	t.Logf("FIGURES pipelines=3 broker_connections_one_shared_client=%d broker_connections_a_client_each=%d", shared, own)
	if shared >= own {
		t.Errorf("%d connections to Kafka with one shared producer client, %d with one each: want fewer shared", shared, own)
	}
}

// TestFleetInflightBudgetWait: a process-wide max-inflight-bytes of 2 MiB
// over three pipelines of 1 MiB each (341 KiB reserved each, 1 MiB lent).
// Kafka stops: billing fills its 1 MiB, orders its reserve and what is
// left to lend, then waits for room under the process's bound, which
// /readyz, walrelay_inflight_process_wait_seconds and the log show;
// shipping, within its reserve, does not wait for it. Once Kafka is back,
// every event is delivered: lost 0.
func TestFleetInflightBudgetWait(t *testing.T) {
	testbed.Disrupt(t)
	budget := func(s string) string {
		return strings.Replace(s, "log-level: info\n", "log-level: info\nmax-inflight-bytes: 2MiB\n", 1)
	}
	// N.B. batches of at most 256 KiB, so that one fits in 1 MiB; a
	// delivery timeout longer than the test, so that no record fails.
	own := []string{"max-inflight-bytes: 1MiB", "kafka-max-message-bytes: 256KiB", "kafka-delivery-timeout: 10m"}
	p, envs := startFleetWith(t, edits(budget, withSettings("orders", own...), withSettings("billing", own...), withSettings("shipping", own...)))
	orders, billing, shipping := envs[0], envs[1], envs[2]
	for _, e := range envs {
		waitStreaming(t, p, e)
	}
	// Each pipeline's topics exist and are known to it before Kafka stops.
	rolledBack := write(t, 20, envs...)
	for _, e := range envs {
		readBack(t, e, rolledBack, false)
	}
	orders.Bed.StopKafka(t)
	kafkaUp := false
	defer func() {
		if !kafkaUp {
			orders.Bed.StartKafka(t)
		}
	}()
	for id := range write(t, 1500, billing) {
		rolledBack[id] = true
	}
	harness.WaitFor(t, time.Minute, "billing to hold its 1 MiB in flight", func() bool {
		return labelled(t, p, "walrelay_inflight_bytes", "billing") > 900<<10
	})
	for id := range write(t, 1500, orders) {
		rolledBack[id] = true
	}
	for id := range write(t, 50, shipping) {
		rolledBack[id] = true
	}
	var why string
	harness.WaitFor(t, time.Minute, "/readyz to name orders waiting for the process's in-flight bound", func() bool {
		code, body := p.Get("/readyz")
		why = body
		return code == 503 && strings.Contains(body, "orders: waiting")
	})
	t.Logf("/readyz: %s", why)
	if !strings.Contains(why, "for room under the process's max-inflight-bytes 2.0 MiB") {
		t.Errorf("/readyz does not say which bound orders waits for:\n%s", why)
	}
	if strings.Contains(why, "shipping: waiting") {
		t.Errorf("/readyz has shipping waiting for the process's bound, within its reserve:\n%s", why)
	}
	if w := labelled(t, p, "walrelay_inflight_process_wait_seconds", "orders"); w <= 0 {
		t.Errorf(`walrelay_inflight_process_wait_seconds{pipeline="orders"} = %v while it waits, want more than 0`, w)
	}
	harness.WaitFor(t, time.Minute, "the log to say orders waits", func() bool {
		for _, l := range strings.Split(p.Log(), "\n") {
			if strings.Contains(l, "pipeline waits for room under the process's in-flight bound") && strings.Contains(l, `"pipeline":"orders"`) {
				return true
			}
		}
		return false
	})
	t.Logf("FIGURES inflight_bytes billing=%.0f orders=%.0f shipping=%.0f", labelled(t, p, "walrelay_inflight_bytes", "billing"),
		labelled(t, p, "walrelay_inflight_bytes", "orders"), labelled(t, p, "walrelay_inflight_bytes", "shipping"))

	orders.Bed.StartKafka(t)
	kafkaUp = true
	for _, e := range envs {
		// N.B. a broker restart may write a record twice.
		if n, v := readBack(t, e, rolledBack, true); v.Lost != 0 {
			t.Errorf("%s lost %d of %d events", e.name, v.Lost, n)
		}
	}
	harness.WaitFor(t, 2*time.Minute, "/readyz to answer 200 once Kafka is back", func() bool { return p.Ready() == 200 })
	if !strings.Contains(p.Log(), "pipeline no longer waits for room under the process's in-flight bound") {
		t.Errorf("the log does not say orders' wait ended")
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
