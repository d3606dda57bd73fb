package main

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/proc"
)

// walsenderCPU follows the walsenders streaming slots (pg_replication_slots'
// active_pid, every 50 ms) and adds up their CPU seconds: a walsender is a
// process of its own per connection, so what each used is its CPU when last
// seen (up to 50 ms of a walsender's last moments are missed). stop ends
// the sampling and returns the sum.
func walsenderCPU(ctx context.Context, pgURL string, slots []string) (stop func() float64) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	seen := map[int]float64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		for ctx.Err() == nil {
			rows, err := conn.Query(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = ANY($1) AND active_pid IS NOT NULL`, slots)
			if err == nil {
				pids, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
				mu.Lock()
				for _, pid := range pids {
					if c := proc.CPUSeconds(int(pid)); c >= 0 {
						seen[int(pid)] = c
					}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		// N.B. one last look at the walsenders still there.
		mu.Lock()
		for pid := range seen {
			if c := proc.CPUSeconds(pid); c >= 0 {
				seen[pid] = c
			}
		}
		var sum float64
		for _, c := range seen {
			sum += c
		}
		mu.Unlock()
		cancel()
		<-done
		return round(sum, 2)
	}
}
