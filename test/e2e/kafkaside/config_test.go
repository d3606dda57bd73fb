package kafkaside

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestConfigurationMistakesExit2: each mistake exits 2 with a message that
// says how to fix it, and never prints the password.
func TestConfigurationMistakesExit2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "s3cr3t-pw"
	dsn := e2etest.WithUser(t, e.DSN, "postgres", secret) // trust auth: the password is ignored but must never leak
	e.Bed.Exec(t, e.DSN, `CREATE ROLE norep_`+e.Prefix+` LOGIN`)
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, "td_"+e.Prefix)
	t.Cleanup(func() { e.Bed.Exec(t, e.DSN, `DROP ROLE IF EXISTS norep_`+e.Prefix) })
	brokers := strings.Join(e.Bed.Brokers(), ",")
	base := func(extra ...string) []string {
		return append([]string{"run", "--pg-url", dsn, "--brokers", brokers, "--slot", e.Slot, "--publication", e.Pub, "--http-addr", ""}, extra...)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown flag", nil, base("--nope"), "unknown flag --nope"},
		{"misspelt flag", nil, base("--broker", brokers), "unknown flag --broker: did you mean --brokers?"},
		{"switch value after a space", nil, base("--create", "false"), "--create=false"},
		{"duration without a unit in the environment", []string{"WALRELAY_SHUTDOWN_TIMEOUT=30"}, base(), `WALRELAY_SHUTDOWN_TIMEOUT="30": want a duration with a unit, e.g. 30s`},
		{"malformed DSN", nil, []string{"run", "--pg-url", "postgres://postgres:" + secret + "@[bad", "--http-addr", ""}, "PostgreSQL connection string"},
		{"missing DSN", nil, []string{"run", "--http-addr", ""}, "set --pg-url or WALRELAY_PG_URL"},
		{"duration without unit", nil, base("--status-interval", "10"), `invalid value "10" for flag -status-interval: want a duration with a unit`},
		{"bad environment variable", []string{"WALRELAY_TOPIC_PARTITIONS=many"}, base(), `WALRELAY_TOPIC_PARTITIONS="many"`},
		{"bad on-poison", nil, base("--on-poison", "maybe"), "want dead-letter, park or halt"},
		{"bad topic template", nil, base("--topic", "x.${"), "unclosed ${"},
		{"bad header columns", nil, base("--header-columns", "type"), "want column:header pairs"},
		{"several mistakes at once", nil, base("--on-poison", "maybe", "--kafka-compression", "brotli"), "compression \"brotli\""},
		{"template names an unknown column", nil, base("--topic", "x.${nope}"), `no column "nope" (named by --topic)`},
		{"table lacks a mapped column", nil, base("--key-column", "aggregate"), `no column "aggregate" (named by --key-column)`},
		{"table does not exist", nil, base("--table", "public.nothere"), "outbox table public.nothere does not exist"},
		{"publication missing without --create", nil, base("--create=false"), "publication \"" + e.Pub + "\" does not exist: run CREATE PUBLICATION"},
		{"slot with another plugin", nil, append(base(), "--slot", "td_"+e.Prefix), `plugin "test_decoding"`},
		{"role lacks REPLICATION", nil, []string{"run", "--pg-url", e2etest.WithUser(t, e.DSN, "norep_"+e.Prefix, secret), "--brokers", brokers, "--slot", e.Slot, "--publication", e.Pub, "--http-addr", ""}, "lacks the REPLICATION attribute: run ALTER ROLE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := e2etest.RunOnce(t, c.env, c.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2; output:\n%s", code, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out)
			}
			if strings.Contains(out, secret) {
				t.Errorf("output shows the password:\n%s", out)
			}
			if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic") {
				t.Errorf("output has a stack trace:\n%s", out)
			}
		})
	}
	if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
		t.Errorf("a failed start created slot %s", e.Slot)
	}
}

// TestMissingTopicWithoutCreateTopics: with --create-topics=false the first
// record to a missing topic stops walrelay with exit 2, naming the topic,
// and nothing is confirmed past it.
func TestMissingTopicWithoutCreateTopics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq, checkpoints := e.Prefix+".dlq", e.Prefix+".checkpoints"
	e.Bed.CreateTopic(t, dlq, 1)
	e.Bed.CreateTopicWith(t, checkpoints, 1, map[string]string{"cleanup.policy": "compact"})
	wit := e.Witness(t)
	relay := e.Start(t, "--create-topics=false", "--dlq-topic", dlq, "--checkpoint-topic", checkpoints)
	relay.WaitStreaming()
	xid := e.ExecXid(t, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{}')`, harness.NewUUID(), e.AggType(0))
	if code := relay.Wait(time.Minute); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if want := "topic does not exist: outbox.event." + e.AggType(0); !strings.Contains(relay.Log(), want) {
		t.Errorf("log lacks %q", want)
	}
	e.CheckPending(t, wit, xid, "the event for the missing topic")
}

// TestKafkaUnreachableAtStart: walrelay keeps retrying, says so, is alive
// but not ready, and stops cleanly.
func TestKafkaUnreachableAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	relay := e.Start(t, "--brokers", "127.0.0.1:1")
	harness.WaitFor(t, 30*time.Second, "a log line about Kafka", func() bool { return strings.Contains(relay.Log(), "reach kafka at 127.0.0.1:1") })
	time.Sleep(2 * time.Second)
	if relay.Exited() {
		t.Fatalf("walrelay exited instead of retrying")
	}
	if code, body := relay.Get("/readyz"); code != 503 {
		t.Errorf("/readyz = %d %q, want 503", code, body)
	}
	if code, _ := relay.Get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// TestMetricsMatchKafka: /metrics counts what a consumer reads back, and
// the health endpoints report a streaming instance.
func TestMetricsMatchKafka(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := &harness.Workload{Writers: 2, Events: 1500, Aggregates: 20, MaxTxRows: 8, Rollback: 0.1}
	w.Prepare(t, e.Env)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	if err := w.Run(context.Background(), e.Env); err != nil {
		t.Fatal(err)
	}
	rows := e.CommittedRows(t)
	recs := c.WaitFor(len(rows), time.Minute)
	harness.WaitFor(t, 30*time.Second, "walrelay_inflight_events to drop to 0", func() bool { return relay.Metric("walrelay_inflight_events") == 0 })
	perTopic := map[string]int{}
	for _, r := range recs {
		perTopic[r.Topic]++
	}
	for topic, n := range perTopic {
		if got := relay.Metric(fmt.Sprintf(`walrelay_events_published_total{topic=%q}`, topic)); got != float64(n) {
			t.Errorf("walrelay_events_published_total{topic=%q} = %v, a consumer read %d", topic, got, n)
		}
	}
	if got := relay.Metric("walrelay_events_published_total"); got != float64(len(recs)) {
		t.Errorf("walrelay_events_published_total = %v, a consumer read %d", got, len(recs))
	}
	if got := relay.Metric("walrelay_commit_to_ack_seconds_count"); got != float64(len(recs)) {
		t.Errorf("walrelay_commit_to_ack_seconds_count = %v, want %d", got, len(recs))
	}
	// The Kafka part of each record's commit → ack: as many, each no longer.
	if got := relay.Metric("walrelay_kafka_ack_seconds_count"); got != float64(len(recs)) {
		t.Errorf("walrelay_kafka_ack_seconds_count = %v, want %d", got, len(recs))
	}
	if kafka, all := relay.Metric("walrelay_kafka_ack_seconds_sum"), relay.Metric("walrelay_commit_to_ack_seconds_sum"); kafka <= 0 || kafka > all {
		t.Errorf("walrelay_kafka_ack_seconds_sum = %v, want above 0 and at most walrelay_commit_to_ack_seconds_sum (%v)", kafka, all)
	}
	if got := relay.Metric(`walrelay_state{state="streaming"}`); got != 1 {
		t.Errorf(`walrelay_state{state="streaming"} = %v, want 1`, got)
	}
	// The slot shows what walrelay sent: read it first, the metric second.
	slotLSN := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
	if got := relay.Metric("walrelay_confirmed_lsn"); got < float64(slotLSN) {
		t.Errorf("walrelay_confirmed_lsn %v is behind the slot's %s", got, slotLSN)
	}
	harness.WaitFor(t, 30*time.Second, "the slot's wal_status to be polled", func() bool {
		v, ok := relay.MetricOK(`walrelay_slot_wal_status{status="reserved"}`)
		return ok && v == 1
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := relay.Get(path); code != 200 {
			t.Errorf("%s = %d %q, want 200", path, code, body)
		}
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
