package harness

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// SampleStreamedTwice samples pg_stat_replication every 100 ms until stop
// is closed, and counts the samples that found two walsenders on one of
// dbs (each database holding one slot: two would stream it twice). The
// function it returns waits for the sampling to end and returns the
// samples that did and all samples taken.
func SampleStreamedTwice(t *testing.T, dsn string, dbs []string, stop <-chan struct{}) func() (twice, samples int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect to sample pg_stat_replication: %v", err)
	}
	var mu sync.Mutex
	var n2, n int
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close(context.Background())
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var k int
			err := conn.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT a.datname FROM pg_stat_replication r
				JOIN pg_stat_activity a ON a.pid = r.pid WHERE a.datname = ANY($1) AND r.state IN ('catchup', 'streaming')
				GROUP BY a.datname HAVING count(*) > 1) x`, dbs).Scan(&k)
			mu.Lock()
			if err == nil {
				n++
				if k > 0 {
					n2++
				}
			}
			mu.Unlock()
		}
	}()
	return func() (int, int) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return n2, n
	}
}
