package kafkaside

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/proc"
)

// memoryInflight is --max-inflight-bytes in TestMemoryBoundPerRowShape;
// WALRELAY_TEST_MEMORY_INFLIGHT_MIB sets another (to measure the GC's share
// at small budgets).
func memoryInflight(t *testing.T) int {
	t.Helper()
	v := os.Getenv("WALRELAY_TEST_MEMORY_INFLIGHT_MIB")
	if v == "" {
		return 8 << 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 {
		t.Fatalf("WALRELAY_TEST_MEMORY_INFLIGHT_MIB=%q: want a number of MiB, at least 2", v)
	}
	return n << 20
}

// memoryConstantMiB is the constant of README's memory bound: walrelay's
// peak resident set stays within --max-inflight-bytes + memoryConstantMiB
// for rows whose pgoutput message is at most 1 MiB.
const memoryConstantMiB = 44

// TestMemoryBoundPerRowShape: with Kafka stalled (no produce request reaches
// it) until --max-inflight-bytes fill up, walrelay's peak RSS stays within the documented bound for every
// row shape: rows wider than their payload (an unmapped jsonb, an unmapped
// bytea), poison rows, and a transaction far larger than the bound. Every
// row arrives: the good ones in their topics, the poison ones in the
// dead-letter topic, each read back by id.
func TestMemoryBoundPerRowShape(t *testing.T) {
	inflight := memoryInflight(t)
	bound := float64(inflight>>20 + memoryConstantMiB)
	shapes := []struct {
		name string
		ddl  string // run before walrelay starts
		// insert commits the rows (one statement, one transaction);
		// $1 is the aggregate type, $2 the first row number.
		insert string
		rows   int // rows per transaction
		txs    int
		poison bool // every row is dead-lettered
	}{
		{
			name:   "plain 300-byte rows",
			insert: `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 97), 'OrderCreated', jsonb_build_object('note', repeat(md5(i::text), 9)) FROM generate_series($2::int, $2::int + 99) i`,
			rows:   100, txs: 120,
		},
		{
			name:   "50 KB unmapped jsonb",
			ddl:    `ALTER TABLE outbox ADD COLUMN doc jsonb`,
			insert: `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 97), 'OrderCreated', jsonb_build_object('note', repeat(md5(i::text), 60)), jsonb_build_object('blob', repeat(md5(i::text), 1600)) FROM generate_series($2::int, $2::int + 99) i`,
			// N.B. 80 × 100 records of ≈2 KB: twice the in-flight budget,
			// so that it fills even when PostgreSQL sends slowly (40 gave
			// 8 MB, and on a busy machine Kafka drained enough that it
			// never reached 3/4 of the 8 MiB within 3 minutes).
			rows: 100, txs: 80,
		},
		{
			name:   "32 KB unmapped bytea",
			ddl:    `ALTER TABLE outbox ADD COLUMN blob bytea`,
			insert: `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 97), 'OrderCreated', jsonb_build_object('note', repeat(md5(i::text), 60)), decode(repeat(md5(i::text), 2048), 'hex') FROM generate_series($2::int, $2::int + 99) i`,
			// N.B. 80 × 100 records of ≈2 KB: twice the in-flight budget,
			// so that it fills even when PostgreSQL sends slowly (40 gave
			// 8 MB, and on a busy machine Kafka drained enough that it
			// never reached 3/4 of the 8 MiB within 3 minutes).
			rows: 100, txs: 80,
		},
		{
			name:   "20,000 NULL-key rows in one transaction",
			ddl:    `ALTER TABLE outbox ALTER COLUMN aggregateid DROP NOT NULL`,
			insert: `INSERT INTO outbox SELECT gen_random_uuid(), $1, NULL, 'OrderCreated', jsonb_build_object('note', repeat(md5(i::text), 30)) FROM generate_series($2::int, $2::int + 19999) i`,
			rows:   20000, txs: 1, poison: true,
		},
		{
			name:   "100,000-row transaction",
			insert: `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 97), 'OrderCreated', jsonb_build_object('note', repeat(md5(i::text), 9)) FROM generate_series($2::int, $2::int + 99999) i`,
			rows:   100000, txs: 1,
		},
	}
	var figures []string
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			e := newEnv(t)
			if s.ddl != "" {
				e.Bed.Exec(t, e.DSN, s.ddl)
			}
			dlq := e.Prefix + ".dlq"
			c := e.Collect(t)
			dc := e.CollectRE(t, "^"+regexp.QuoteMeta(dlq)+"$")
			proxy := harness.NewKafkaProxy(t, e.Bed.Brokers()[0])
			relay := e.StartEnv(t, []string{"GODEBUG=gctrace=1"},
				"--brokers", proxy.Addr(),
				"--max-inflight-bytes", strconv.Itoa(inflight),
				"--dlq-topic", dlq,
				"--kafka-max-message-bytes", strconv.Itoa(256<<10),
				// N.B. the held records must not time out (that
				// restarts the pipeline, another scenario).
				"--kafka-delivery-timeout", "15m")
			relay.WaitStreaming()
			baseline := relay.PeakRSSMB()

			// Kafka stalled: no produce request reaches the broker (on
			// any connection: the marker store's is not the records'; from
			// streaming on: walrelay writes to Kafka before it), so
			// walrelay's in-flight bytes fill up while PostgreSQL sends
			// the rows, whatever the machine's load. N.B. not a slow link
			// (100 ms, 256 KiB/s, as before): beside make test's three
			// beds PostgreSQL sent so slowly that Kafka kept up, and the
			// 12,000 plain rows never filled 3/4 of the budget within 3
			// minutes.
			release := proxy.HoldAll(harness.KafkaProduce)
			for i := range s.txs {
				e.Bed.Exec(t, e.DSN, s.insert, e.AggType(i), i*s.rows)
			}
			after := e.Bed.CurrentWALLSN(t, e.DSN)
			full := 0.0
			harness.WaitFor(t, 3*time.Minute, "--max-inflight-bytes to fill up", func() bool {
				if relay.Exited() {
					t.Fatalf("walrelay exited while Kafka was stalled")
				}
				v, _ := relay.MetricOK("walrelay_inflight_bytes")
				full = max(full, v)
				return full >= float64(inflight)*3/4
			})
			// Held full for a while: the replication buffer and a
			// transaction part fill up behind it.
			for range 15 {
				time.Sleep(200 * time.Millisecond)
				v, _ := relay.MetricOK("walrelay_inflight_bytes")
				full = max(full, v)
			}
			release()

			total := s.rows * s.txs
			ids := map[string]bool{}
			if s.poison {
				dead := dc.WaitFor(total, 5*time.Minute)
				for _, r := range dead {
					if id, ok := harness.Header(r, "walrelay.event.id"); ok {
						ids[id] = true
					}
					if cls, _ := harness.Header(r, "walrelay.error.class"); cls != "null_key" {
						t.Errorf("dead-letter record of class %q, want null_key", cls)
					}
				}
			} else {
				committed := e.CommittedRows(t)
				if len(committed) != total {
					t.Fatalf("%d rows committed, want %d", len(committed), total)
				}
				recs := c.WaitFor(total, 5*time.Minute)
				e2etest.CheckRecords(t, e, c.ToEnd(), committed, nil, 3, false)
				for _, r := range recs {
					id, _ := harness.Header(r, "id")
					ids[id] = true
				}
			}
			for _, id := range outboxIDs(t, e) {
				if !ids[id] {
					t.Errorf("row %s was not read back", id)
					break
				}
			}
			harness.WaitFor(t, time.Minute, "the slot to move past the rows", func() bool {
				return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
			})
			peak := relay.PeakRSSMB()
			gcCPU, gcs := gcSeconds(relay.Log())
			cpu := cpuSeconds(relay.Pid())
			fileMiB := float64(proc.StatusKB(relay.Pid(), "RssFile")) / 1024 // the executable's pages, mostly
			if code := relay.Stop(time.Minute); code != 0 {
				t.Errorf("walrelay exit code %d, want 0", code)
			}
			if full < float64(inflight)*3/4 {
				t.Errorf("in-flight bytes peaked at %.0f, under 3/4 of --max-inflight-bytes %d: Kafka was not slow enough to test the bound", full, inflight)
			}
			// N.B. the bound README documents: --max-inflight-bytes +
			// memoryConstantMiB.
			if peak > bound {
				t.Errorf("peak RSS %.1f MiB, above the bound %.0f MiB (--max-inflight-bytes %d MiB + %d MiB)", peak, bound, inflight>>20, memoryConstantMiB)
			}
			f := fmt.Sprintf("shape=%q rows=%d inflight_mib=%d max_inflight_counted_mib=%.1f baseline_rss_mib=%.1f rss_file_mib=%.1f peak_rss_mib=%.1f bound_mib=%.0f gcs=%d gc_cpu_s=%.2f cpu_s=%.2f gc_share_no_idle=%.0f%%",
				s.name, total, inflight>>20, full/(1<<20), baseline, fileMiB, peak, bound, gcs, gcCPU, cpu, 100*gcCPU/max(cpu, 0.01))
			t.Logf("FIGURES %s", f)
			figures = append(figures, f)
		})
	}
	t.Logf("FIGURES per shape:\n%s", strings.Join(figures, "\n"))
}

// outboxIDs lists the ids of every committed outbox row.
func outboxIDs(t *testing.T, e *env) []string {
	t.Helper()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT id::text FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// gcTraceRE matches a GODEBUG=gctrace=1 line's CPU times:
// "gc 12 @3.1s 2%: 0.01+1.2+0.02 ms clock, 0.03+0.5/1.1/0.2+0.05 ms cpu".
var gcTraceRE = regexp.MustCompile(`(?m)^gc \d+ @[0-9.]+s \d+%: \S+ ms clock, (\S+) ms cpu`)

// gcSeconds sums the CPU time of the collections a gctrace log reports,
// without the idle-time marking (which runs on processors that have
// nothing else to do).
func gcSeconds(log string) (seconds float64, n int) {
	for _, m := range gcTraceRE.FindAllStringSubmatch(log, -1) {
		n++
		// sweep termination + assist/background/idle mark + mark termination
		for i, f := range strings.FieldsFunc(m[1], func(r rune) bool { return r == '+' || r == '/' }) {
			if ms, err := strconv.ParseFloat(f, 64); err == nil && i != 3 {
				seconds += ms / 1000
			}
		}
	}
	return seconds, n
}

// cpuSeconds is utime+stime of pid from /proc/PID/stat (USER_HZ 100), or 0.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return float64(ut+st) / 100
}
