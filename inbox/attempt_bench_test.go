package inbox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkAttempt is the inbox's own cost of a record, without Kafka, the
// way it is now beside the way it was: per op, one record through the
// former steps (Pool.Begin, then the id insert: three round trips with
// COMMIT), one through the present ones (BEGIN and the id insert pipelined:
// two) and one through attempt itself, in turn, so that the machine's load
// weighs on all three alike. The Handler inserts one row. Reported per
// record, in µs: each step (begin+insert, handler, commit) of the former
// and present ways, and attempt's whole. On 1 partition (one goroutine)
// and 6 (six at once). A figure, not a threshold:
//
//	go run ./test/cmd/testbed -- go test -run '^$' -bench Attempt -benchtime 2000x ./inbox/
func BenchmarkAttempt(b *testing.B) {
	f := newFixtureTB(b, 1)
	c, err := New(f.config(record), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, parts := range []int{1, 6} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			var seq atomic.Int64
			var mu sync.Mutex
			var sum [7]time.Duration // former: begin, insert, handler, commit; present: begin+insert, handler, commit
			var whole time.Duration
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			for range parts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var s [7]time.Duration
					var w time.Duration
					for i := 0; left.Add(-1) >= 0; i++ {
						for k := range 3 {
							id := fmt.Sprintf("id-%d", seq.Add(1))
							r := rec("k", id, i)
							var err error
							switch (i + k) % 3 {
							case 0:
								err = formerSteps(c, r, id, s[0:4])
							case 1:
								err = presentSteps(c, r, id, s[4:7])
							case 2:
								t := time.Now()
								_, err = c.attempt(context.Background(), r, []byte(id))
								w += time.Since(t)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					}
					mu.Lock()
					for k := range s {
						sum[k] += s[k]
					}
					whole += w
					mu.Unlock()
				}()
			}
			wg.Wait()
			us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			former := sum[0] + sum[1] + sum[2] + sum[3]
			present := sum[4] + sum[5] + sum[6]
			b.ReportMetric(us(former), "former-µs/record")
			b.ReportMetric(us(present), "present-µs/record")
			b.ReportMetric(us(whole), "attempt-µs/record")
			if b.N < 100 {
				return // the first connections' setup, not a figure
			}
			b.Logf("%d partitions, µs a record: former %.0f = begin %.0f + insert %.0f + handler %.0f + commit %.0f; present %.0f = begin+insert %.0f + handler %.0f + commit %.0f; attempt %.0f",
				parts, us(former), us(sum[0]), us(sum[1]), us(sum[2]), us(sum[3]), us(present), us(sum[4]), us(sum[5]), us(sum[6]), us(whole))
		})
	}
}

// formerSteps applies r the way attempt did before BEGIN and the id insert
// were pipelined, timing begin, insert, handler and commit into d.
func formerSteps(c *Consumer, r *kgo.Record, id string, d []time.Duration) error {
	ctx := context.Background()
	t := time.Now()
	tx, err := c.cfg.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	t = lap(t, &d[0])
	if _, err := tx.Exec(ctx, c.insert, c.cfg.Group, id); err != nil {
		return err
	}
	t = lap(t, &d[1])
	if err := record(ctx, tx, r); err != nil {
		return err
	}
	t = lap(t, &d[2])
	err = tx.Commit(ctx)
	lap(t, &d[3])
	return err
}

// presentSteps applies r the way attempt does (beginWith), timing
// begin+insert, handler and commit into d.
func presentSteps(c *Consumer, r *kgo.Record, id string, d []time.Duration) error {
	ctx := context.Background()
	t := time.Now()
	tx, br := c.beginWith(ctx, c.insert, c.cfg.Group, id)
	defer tx.Rollback(ctx)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	t = lap(t, &d[0])
	if err := record(ctx, tx, r); err != nil {
		return err
	}
	t = lap(t, &d[1])
	err = tx.Commit(ctx)
	lap(t, &d[2])
	return err
}

// lap adds the time since t to d and returns now.
func lap(t time.Time, d *time.Duration) time.Time {
	now := time.Now()
	*d += now.Sub(t)
	return now
}
