package inbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func kadmClient(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }

// BenchmarkThroughput reports records/s of one member over a backlog of
// 6,000 records on 6 partitions (60 keys), with a Handler that writes one
// row and then takes 0 or 2 ms. A figure, not a threshold:
//
//	go run ./test/cmd/testbed -- go test -run '^$' -bench Throughput -benchtime 1x ./inbox/
func BenchmarkThroughput(b *testing.B) {
	for _, d := range []time.Duration{0, 2 * time.Millisecond} {
		b.Run(fmt.Sprintf("handler=%s", d), func(b *testing.B) {
			for range b.N {
				throughput(b, d)
			}
		})
	}
}

func throughput(b *testing.B, d time.Duration) {
	b.StopTimer()
	const n = 6000
	bed := newFixtureTB(b, 6)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, rec(fmt.Sprintf("k%d", i%60), fmt.Sprintf("id-%d", i), i))
	}
	bed.produce(b, recs...)
	h := func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		if err := record(ctx, tx, r); err != nil {
			return err
		}
		time.Sleep(d)
		return nil
	}
	cfg := bed.config(h)
	c, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// N.B. timed from the first record applied: the group's join is not
	// the consumer's throughput.
	for c.Stats().Applied == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	b.StartTimer()
	for c.Stats().Applied < n {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	el := time.Since(start)
	b.ReportMetric(float64(n)/el.Seconds(), "records/s")
	b.Logf("handler %s: %d records on 6 partitions in %s: %.0f records/s", d, n, el.Round(time.Millisecond), float64(n)/el.Seconds())
}
