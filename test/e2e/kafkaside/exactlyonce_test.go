package kafkaside

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestExactlyOnceRefusals: what cannot be exactly-once is refused at start
// with exit 2 and the fix, and `check` says so: a checkpoint topic that is
// not compacted, a transaction timeout the broker refuses, and one not
// above the delivery timeout. Nothing is produced.
func TestExactlyOnceRefusals(t *testing.T) {
	e := newEnv(t)
	deleting := "walrelay.checkpoints.delete." + e.Prefix
	e.Bed.CreateTopicWith(t, deleting, 1, map[string]string{"cleanup.policy": "delete"})
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'a1', 'created', '{}')`, harness.NewUUID(), e.AggType(0))
	cases := []struct {
		name, flag, value, want string
	}{
		{"delete policy", "--checkpoint-topic", deleting, "has cleanup.policy=delete"},
		{"timeout above the broker's maximum", "--kafka-transaction-timeout", "20m", "lower --kafka-transaction-timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := e2etest.RunOnce(t, nil, e.Args("run", "--exactly-once", c.flag, c.value)...)
			if code != 2 || !strings.Contains(out, c.want) {
				t.Errorf("walrelay run --exactly-once %s %s: exit %d, want 2 with %q; output:\n%s", c.flag, c.value, code, c.want, out)
			}
			code, out = e2etest.RunOnce(t, nil, e.Args("check", "--exactly-once", c.flag, c.value)...)
			if code != 2 || !strings.Contains(out, "FAIL") {
				t.Errorf("walrelay check --exactly-once %s %s: exit %d, want 2 with a FAIL line; output:\n%s", c.flag, c.value, code, out)
			}
		})
	}
	code, out := e2etest.RunOnce(t, nil, e.Args("run", "--exactly-once", "--kafka-transaction-timeout", "1m", "--kafka-delivery-timeout", "2m")...)
	if code != 2 || !strings.Contains(out, "is not above --kafka-delivery-timeout") {
		t.Errorf("transaction timeout below the delivery timeout: exit %d, want 2 naming both; output:\n%s", code, out)
	}
	code, out = e2etest.RunOnce(t, nil, e.Args("check", "--exactly-once")...)
	if code != 0 || !strings.Contains(out, "PASS  Kafka transactions") || !strings.Contains(out, "PASS  checkpoint topic") {
		t.Errorf("walrelay check --exactly-once: exit %d, want 0 with the transactions and checkpoint topic checks passed; output:\n%s", code, out)
	}
	if recs := e.Bed.ConsumeAll(t, e.Topics(), 0); len(recs) != 0 {
		t.Errorf("%d records produced by refused runs", len(recs))
	}
}

// TestExactlyOnceTransactionTooLong: a PostgreSQL transaction that cannot
// be relayed within 3/4 of --kafka-transaction-timeout (Kafka reached
// through a proxy at 1 MB/s, a 10 MB transaction, an 8s timeout): walrelay
// aborts the Kafka transaction and stops with exit 2, naming the
// transaction and the setting to raise. A read_committed consumer sees
// none of it, and the slot is not confirmed past it; the transaction
// before it is delivered.
func TestExactlyOnceTransactionTooLong(t *testing.T) {
	e := harness.NewEnv(t, relayBin)
	e.ExactlyOnce()
	wit := harness.NewWitness(t, e)
	proxy := harness.NewKafkaProxy(t, e.Bed.Brokers()[0])
	relay := e.StartRelay(t, "--brokers", proxy.Addr(), "--kafka-compression", "none", "--max-inflight-bytes", "2097152",
		"--kafka-delivery-timeout", "5s", "--kafka-transaction-timeout", "8s")
	relay.WaitStreaming()
	small := harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'a1', 'created', '{}')`, small, e.AggType(0))
	harness.WaitFor(t, time.Minute, "the small transaction in Kafka", func() bool {
		recs, _ := e.Bed.ConsumeAllCommitted(t, e.Topics(), 0)
		return len(recs) == 1
	})
	proxy.SetRate(1 << 20)
	var xid uint32
	e.Bed.QueryRow(t, e.DSN, `WITH ins AS (INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
		SELECT gen_random_uuid(), $1, 'a' || (i % 50), 'created', jsonb_build_object('pad', repeat(md5(i::text), 32))
		FROM generate_series(1, 10000) i RETURNING 1) SELECT txid_current()::bigint::int FROM ins LIMIT 1`, e.AggType(1)).Scan(&xid)
	code := relay.Wait(2 * time.Minute)
	log := relay.Log()
	if code != 2 || !strings.Contains(log, "too long for one kafka transaction") || !strings.Contains(log, fmt.Sprintf("xid %d", xid)) ||
		!strings.Contains(log, "raise --kafka-transaction-timeout") {
		t.Errorf("walrelay exit %d, want 2 with an error naming xid %d and --kafka-transaction-timeout", code, xid)
	}
	ends := wit.CommitEnds(t)
	proxy.SetRate(0)
	recs, _ := e.Bed.ConsumeAllCommitted(t, e.Topics(), time.Second)
	var big int
	for _, r := range harness.FromKafka(recs) {
		if r.ID != small {
			big++
		}
	}
	slot := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
	t.Logf("RESULT %s exit=%d records_of_the_big_transaction=%d slot=%s big_end=%s", t.Name(), code, big, slot, ends[xid])
	if big != 0 {
		t.Errorf("a read_committed consumer reads %d records of the transaction that was too long, want 0", big)
	}
	if end, ok := ends[xid]; !ok || slot >= end {
		t.Errorf("slot confirmed at %s, want below the big transaction's end %s", slot, end)
	}
}
