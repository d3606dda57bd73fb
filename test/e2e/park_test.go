package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// parkBed is one parking test's relay settings and topics.
type parkBed struct {
	e          *e2etest.Env
	topic      string // the aggregates' topic, its max.message.bytes small
	dlq, state string
	others     int
	eos        bool              // --exactly-once: redrive too
	seq        map[string]int    // the last seq written per aggregate
	ids        map[string]string // event ids by "key/seq"
}

const (
	parkLimit = 4000 // the topic's max.message.bytes at first
	parkK     = "agg-K"
)

// newParkBed creates the aggregates' topic with a small limit, as an
// operator would have.
func newParkBed(t *testing.T, others int) *parkBed {
	e := newEnv(t)
	b := &parkBed{e: e, topic: "outbox.event." + e.AggType(0), dlq: e.Prefix + ".dlq", state: e.Prefix + ".state", others: others, seq: map[string]int{}, ids: map[string]string{}}
	e2etest.CreateTopicWithLimit(t, e, b.topic, parkLimit)
	return b
}

// relayArgs are run's flags for parking.
func (b *parkBed) relayArgs() []string {
	return []string{"--on-poison", "park", "--dlq-topic", b.dlq, "--checkpoint-topic", b.state}
}

// dlq runs `walrelay dlq args...` to its end.
func (b *parkBed) runDLQ(t *testing.T, args ...string) (int, string) {
	t.Helper()
	all := append([]string{"dlq"}, args...)
	all = append(all, "--brokers", strings.Join(b.e.KafkaBrokers(), ","), "--dlq-topic", b.dlq, "--checkpoint-topic", b.state)
	if b.eos {
		all = append(all, "--exactly-once")
	}
	return e2etest.RunFor(t, 3*time.Minute, nil, all...)
}

// write commits n rounds: one event of K and of each other aggregate per
// round, K's at round bigAt (1-based, 0: none) over the topic's limit.
func (b *parkBed) write(t *testing.T, n, bigAt int) {
	t.Helper()
	ctx := context.Background()
	conn := harness.Connect(t, b.e.DSN)
	defer conn.Close(ctx)
	for i := 1; i <= n; i++ {
		keys := []string{parkK}
		for o := 0; o < b.others; o++ {
			keys = append(keys, fmt.Sprintf("agg-%02d", o))
		}
		for _, k := range keys {
			b.seq[k]++
			pad := ""
			if k == parkK && i == bigAt {
				// N.B. random: a record compression cannot shrink
				// below the broker's limit.
				pad = harness.NewUUID()
				for len(pad) < 2*parkLimit {
					pad += harness.NewUUID()
				}
			}
			payload := fmt.Sprintf(`{"seq": %d, "pad": "%s"}`, b.seq[k], pad)
			id := harness.NewUUID()
			b.ids[fmt.Sprintf("%s/%d", k, b.seq[k])] = id
			if _, err := conn.Exec(ctx, `INSERT INTO outbox VALUES ($1, $2, $3, 'Changed', $4::jsonb)`, id, b.e.AggType(0), k, payload); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitConfirmed waits until the slot is confirmed past everything
// committed so far.
func (b *parkBed) waitConfirmed(t *testing.T) {
	t.Helper()
	after := b.e.Bed.CurrentWALLSN(t, b.e.DSN)
	harness.WaitFor(t, 2*time.Minute, "the slot to be confirmed past the last event", func() bool {
		return b.e.Bed.Slot(t, b.e.DSN, b.e.Slot).ConfirmedFlushLSN >= after
	})
}

// histories are the seq values each aggregate's records carry, in topic
// order (one partition: the topic's).
func histories(t *testing.T, recs []*kgo.Record, topic string) map[string][]int {
	t.Helper()
	h := map[string][]int{}
	for _, r := range recs {
		if r.Topic != topic {
			continue
		}
		var v struct {
			Seq int `json:"seq"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		h[string(r.Key)] = append(h[string(r.Key)], v.Seq)
	}
	return h
}

// checkHistory fails unless seqs, read as a consumer that drops what it
// has seen (an inbox), is 1..want in order: duplicates allowed, no
// reordering, no gap.
func checkHistory(t *testing.T, key string, seqs []int, want int) {
	t.Helper()
	next := 1
	for _, s := range seqs {
		switch {
		case s < next: // a duplicate
		case s == next:
			next++
		default:
			t.Errorf("aggregate %s: seq %d after %d: a gap followed by a later event (history %v)", key, s, next-1, seqs)
			return
		}
	}
	if next-1 != want {
		t.Errorf("aggregate %s: history ends at %d, want %d (history %v)", key, next-1, want, seqs)
	}
}

// parkedSeqs are the seq values of K's parked dead letters, in the
// dead-letter topic's order.
func parkedSeqs(t *testing.T, recs []*kgo.Record) []int {
	t.Helper()
	var out []int
	for _, r := range recs {
		if _, ok := harness.Header(r, "walrelay.parked.aggregate"); !ok || string(r.Key) != parkK {
			continue
		}
		var v struct {
			Seq int `json:"seq"`
		}
		if json.Unmarshal(r.Value, &v) == nil {
			out = append(out, v.Seq)
		}
	}
	return out
}

// raiseLimit raises the topic's max.message.bytes, as the operator fixing
// the cause would.
func (b *parkBed) raiseLimit(t *testing.T) {
	t.Helper()
	b.setLimit(t, "1048588")
}

// setLimit sets the topic's max.message.bytes and waits until the broker
// applies it.
func (b *parkBed) setLimit(t *testing.T, limit string) {
	t.Helper()
	adm := kadm.NewClient(e2etest.MustClient(t, b.e))
	rs, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: e2etest.Ptr(limit)}}, b.topic)
	if err == nil {
		for _, r := range rs {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("set max.message.bytes of %s: %v", b.topic, err)
	}
	// N.B. the broker applies a topic's new configuration from the
	// metadata log a moment later; a record produced before that is still
	// refused as too large.
	harness.WaitFor(t, time.Minute, "the broker to apply max.message.bytes "+limit+" to "+b.topic, func() bool {
		rcs, err := adm.DescribeTopicConfigs(context.Background(), b.topic)
		if err != nil {
			return false
		}
		rc, err := rcs.On(b.topic, nil)
		if err != nil || rc.Err != nil {
			return false
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" {
				return c.MaybeValue() == limit
			}
		}
		return false
	})
}

// TestParkRedrive: aggregate K gets an event over its topic's
// max.message.bytes in the middle of its history; with --on-poison=park
// K's later events go to the dead-letter topic behind it while 20 other
// aggregates flow in order; the operator raises the limit and runs
// walrelay dlq redrive: a real consumer then holds K's whole history in
// commit order with no gap, and K's next events flow after it.
func TestParkRedrive(t *testing.T) { parkRedrive(t, false) }

// TestParkRedriveExactlyOnce is TestParkRedrive with --exactly-once: the
// park records go in the relay's Kafka transactions, and redrive
// publishes K's events and its release inside one of its own.
func TestParkRedriveExactlyOnce(t *testing.T) { parkRedrive(t, true) }

func parkRedrive(t *testing.T, eos bool) {
	t.Parallel()
	b := newParkBed(t, 20)
	if eos {
		b.e.ExactlyOnce()
		b.state, b.eos = b.e.CheckpointTopic(), true
	}
	c := b.e.Collect(t)
	dc := b.e.DLQCollector(t, b.dlq)
	relay := b.e.Start(t, b.relayArgs()...)
	relay.WaitStreaming()
	b.write(t, 10, 4)
	b.waitConfirmed(t)

	h := histories(t, c.ToEnd(), b.topic)
	for o := 0; o < b.others; o++ {
		k := fmt.Sprintf("agg-%02d", o)
		checkHistory(t, k, h[k], 10)
	}
	checkHistory(t, parkK, h[parkK], 3)
	if got := parkedSeqs(t, dc.ToEnd()); fmt.Sprint(got) != fmt.Sprint([]int{4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("K's parked dead letters carry seq %v, want 4 to 10 in order", got)
	}
	if n := relay.Metric("walrelay_parked_aggregates"); n != 1 {
		t.Errorf("walrelay_parked_aggregates %v, want 1", n)
	}
	code, out := b.runDLQ(t, "list")
	if code != 0 || !strings.Contains(out, "parked aggregates: 1") || !regexp.MustCompile(`key\s+agg-K\n`).MatchString(out) {
		t.Fatalf("dlq list: exit %d:\n%s", code, out)
	}
	listOut := out
	code, out = b.runDLQ(t, "show", "--event", b.ids[parkK+"/5"])
	if code != 0 || !strings.Contains(out, `"seq": 5`) || !strings.Contains(out, "re-publishable  yes") {
		t.Fatalf("dlq show: exit %d:\n%s", code, out)
	}
	if !eos {
		checkDocBlock(t, "dlq list", listOut)
		checkDocBlock(t, "dlq show", out)
		out, code = e2etest.RunCmd(t, b.e, "check", b.relayArgs()...)
		if !strings.Contains(out, "parked aggregates on "+b.state) || !strings.Contains(out, "key agg-K) parked for") {
			t.Errorf("walrelay check (exit %d) does not list K as parked:\n%s", code, out)
		}
		b.statusParked(t, 1, "topic "+b.topic+" key "+parkK+": 7 events through ")
	}

	b.raiseLimit(t)
	code, out = b.runDLQ(t, "redrive", "--agg-topic", b.topic, "--agg-key", parkK)
	if code != 0 || !strings.Contains(out, "re-published 7 events") || !strings.Contains(out, "the relay un-parked the aggregate") {
		t.Fatalf("dlq redrive: exit %d:\n%s", code, out)
	}
	harness.WaitFor(t, time.Minute, "walrelay_parked_aggregates to drop to 0", func() bool {
		return relay.Metric("walrelay_parked_aggregates") == 0
	})
	if !eos {
		b.statusParked(t, 0, "")
	}
	b.write(t, 1, 0)
	b.waitConfirmed(t)
	h = histories(t, c.ToEnd(), b.topic)
	for o := 0; o < b.others; o++ {
		k := fmt.Sprintf("agg-%02d", o)
		checkHistory(t, k, h[k], 11)
	}
	checkHistory(t, parkK, h[parkK], 11)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// statusParked runs walrelay status with the Kafka settings and checks
// that it counts n parked aggregates of the slot and, if n > 0, lists
// one by a row holding row.
func (b *parkBed) statusParked(t *testing.T, n int, row string) {
	t.Helper()
	out, code := e2etest.RunCmd(t, b.e, "status", "--checkpoint-topic", b.state)
	want := fmt.Sprintf("parked_aggregates      %d (state topic %s)\n", n, b.state)
	if code != 0 || !strings.Contains(out, want) || n > 0 && !regexp.MustCompile(`\nparked +`+regexp.QuoteMeta(row)).MatchString(out) ||
		n == 0 && regexp.MustCompile(`\nparked +`).MatchString(out) {
		t.Errorf("walrelay status (exit %d), want %q and %d parked rows (%q):\n%s", code, want, n, row, out)
	}
}

// TestParkRedriveKill: the same history, with kill -9 of the relay while
// K is parked (the relay started again reads K's park from the state topic
// and parks K's next events too) and kill -9 of the redrive midway, after
// part of K's events are re-published and before its release: K stays
// parked, and redrive run again leaves K whole and in order (the part
// re-published twice: duplicates, no gap).
func TestParkRedriveKill(t *testing.T) {
	t.Parallel()
	b := newParkBed(t, 20)
	c := b.e.Collect(t)
	dc := b.e.DLQCollector(t, b.dlq)
	relay := b.e.Start(t, b.relayArgs()...)
	relay.WaitStreaming()
	b.write(t, 10, 4)
	b.waitConfirmed(t)
	relay.Kill()

	relay = b.e.Start(t, b.relayArgs()...)
	relay.WaitStreaming()
	b.write(t, 2, 0)
	b.waitConfirmed(t)
	h := histories(t, c.ToEnd(), b.topic)
	checkHistory(t, parkK, h[parkK], 3)
	if got := parkedSeqs(t, dc.ToEnd()); fmt.Sprint(dedupe(got)) != fmt.Sprint([]int{4, 5, 6, 7, 8, 9, 10, 11, 12}) {
		t.Fatalf("K's parked dead letters carry seq %v, want 4 to 12 (after the restart too)", got)
	}

	b.raiseLimit(t)
	args := []string{"dlq", "redrive", "--agg-topic", b.topic, "--agg-key", parkK,
		"--brokers", strings.Join(b.e.KafkaBrokers(), ","), "--dlq-topic", b.dlq, "--checkpoint-topic", b.state}
	rd := harness.StartProcess(t, e2etest.Bin, []string{"WALRELAY_TEST_REDRIVE_PAUSE_AFTER=3"}, args)
	harness.WaitFor(t, 2*time.Minute, "redrive to pause midway", func() bool {
		return strings.Contains(rd.Log(), "redrive paused after 3 records") || rd.Exited()
	})
	if rd.Exited() {
		t.Fatalf("redrive exited before pausing:\n%s", rd.Log())
	}
	rd.Kill()
	h = histories(t, c.ToEnd(), b.topic)
	if got := fmt.Sprint(h[parkK]); got != fmt.Sprint([]int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("K after the killed redrive: %s, want 1 to 6", got)
	}
	if n := relay.Metric("walrelay_parked_aggregates"); n != 1 {
		t.Errorf("walrelay_parked_aggregates %v after the killed redrive, want 1 (no release was written)", n)
	}

	code, out := b.runDLQ(t, "redrive", "--agg-topic", b.topic, "--agg-key", parkK)
	if code != 0 || !strings.Contains(out, "re-published 9 events") || !strings.Contains(out, "the relay un-parked the aggregate") {
		t.Fatalf("dlq redrive again: exit %d:\n%s", code, out)
	}
	b.write(t, 1, 0)
	b.waitConfirmed(t)
	h = histories(t, c.ToEnd(), b.topic)
	for o := 0; o < b.others; o++ {
		k := fmt.Sprintf("agg-%02d", o)
		checkHistory(t, k, h[k], 13)
	}
	checkHistory(t, parkK, h[parkK], 13)
	t.Logf("K's history as a consumer reads it: %v", h[parkK])
	b.inboxKeepsOrder(t)
}

// dedupe is seqs without repeats, in first-seen order.
func dedupe(seqs []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, s := range seqs {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// The masks of checkDocBlock: what differs from run to run.
var docMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "UUID"},
	{regexp.MustCompile(`(t|_)[0-9a-f]{8}`), "${1}HEX"},
	{regexp.MustCompile(`[0-9A-F]+/[0-9A-F]+`), "LSN"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT[\d:.]+Z`), "TIME"},
	{regexp.MustCompile(`(\d+h)?(\d+m)?\d+s ago`), "AGE ago"},
	{regexp.MustCompile(`\b\d{19}\b`), "SYSID"},
	{regexp.MustCompile(`/\d+@\d+`), "/P@O"},
}

// checkDocBlock compares out with the block of docs/dlq.md after the
// line "<!-- name: from TestParkRedrive -->", what differs between runs
// masked (docMasks): the docs show real output.
func checkDocBlock(t *testing.T, name, out string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/dlq.md")
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- " + name + ": from TestParkRedrive -->\n```\n"
	_, rest, ok := strings.Cut(string(b), marker)
	block, _, ok2 := strings.Cut(rest, "```\n")
	mask := func(s string) string {
		for _, m := range docMasks {
			s = m.re.ReplaceAllString(s, m.with)
		}
		return s
	}
	if !ok || !ok2 || mask(block) != mask(out) {
		t.Errorf("docs/dlq.md's %q block differs from the output (masked):\n%s\nthe output, to paste there:\n%s", name, mask(block), out)
	}
}

// inboxKeepsOrder runs an inbox consumer (package inbox, unchanged) over
// the aggregates' topic, duplicates of the redrive included, and checks
// that it applied each aggregate's events once each, in commit order:
// the redrive keeps an inbox's per-aggregate order.
func (b *parkBed) inboxKeepsOrder(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.e.Bed.Exec(t, b.e.DSN, `CREATE TABLE applied (n serial PRIMARY KEY, key text NOT NULL, seq int NOT NULL)`)
	pool, err := pgxpool.New(ctx, b.e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := inbox.CreateTable(ctx, pool, ""); err != nil {
		t.Fatal(err)
	}
	c, err := inbox.New(inbox.Config{
		Brokers: b.e.KafkaBrokers(), Group: "park-" + b.e.Prefix, Topics: []string{b.topic}, Pool: pool,
		Handler: func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			var v struct {
				Seq int `json:"seq"`
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				return inbox.Permanent(err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO applied (key, seq) VALUES ($1, $2)`, string(r.Key), v.Seq)
			return err
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	want := (b.others + 1) * b.seq[parkK]
	conn := harness.Connect(t, b.e.DSN)
	defer conn.Close(context.Background())
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("the inbox to apply %d events", want), func() bool {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM applied`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n >= want
	})
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("inbox: %v", err)
	}
	rows, err := conn.Query(context.Background(), `SELECT key, seq FROM applied ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string][]int{}
	for rows.Next() {
		var k string
		var s int
		if err := rows.Scan(&k, &s); err != nil {
			t.Fatal(err)
		}
		applied[k] = append(applied[k], s)
	}
	for k, seqs := range applied {
		if fmt.Sprint(seqs) != fmt.Sprint(dedupe(seqs)) {
			t.Errorf("the inbox applied an event of %s twice: %v", k, seqs)
		}
		checkHistory(t, k, seqs, b.seq[k])
	}
	if len(applied) != b.others+1 {
		t.Errorf("the inbox applied events of %d aggregates, want %d", len(applied), b.others+1)
	}
}
