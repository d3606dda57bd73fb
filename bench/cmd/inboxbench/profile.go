package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// profiler writes, with INBOXBENCH_PROFILE=dir, the consumer's CPU, block
// and mutex profiles and a breakdown of a record's time to dir at exit:
// the Handler's wait as slept, the time per partition between one
// Handler's end and the next one's start (begin, id insert, commit, the
// queue), the pool's acquire waits and pg_stat_activity's wait events.
type profiler struct {
	dir  string
	cpu  *os.File
	mu   sync.Mutex
	slep time.Duration
	n    int64
	gap  map[int32]time.Duration
	gapN map[int32]int64
	last map[int32]time.Time
	wait map[string]int
	stop chan struct{}
	done chan struct{}
}

func startProfiler(ctx context.Context, pool *pgxpool.Pool) *profiler {
	dir := os.Getenv("INBOXBENCH_PROFILE")
	if dir == "" {
		return nil
	}
	p := &profiler{dir: dir, gap: map[int32]time.Duration{}, gapN: map[int32]int64{}, last: map[int32]time.Time{},
		wait: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	_ = os.MkdirAll(dir, 0o755)
	runtime.SetBlockProfileRate(10000)
	runtime.SetMutexProfileFraction(5)
	if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid()))); err == nil {
		p.cpu = f
		_ = pprof.StartCPUProfile(f)
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			rows, err := pool.Query(ctx, `SELECT coalesce(wait_event_type,'CPU') || ':' || coalesce(wait_event,'-') || ':' || state FROM pg_stat_activity WHERE application_name = current_setting('application_name') AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
			if err != nil {
				continue
			}
			for rows.Next() {
				var s string
				if rows.Scan(&s) == nil {
					p.mu.Lock()
					p.wait[s]++
					p.mu.Unlock()
				}
			}
			rows.Close()
		}
	}()
	return p
}

// handlerStart and handlerEnd bracket a Handler's run on partition part.
func (p *profiler) handlerStart(part int32) {
	if p == nil {
		return
	}
	now := time.Now()
	p.mu.Lock()
	if l, ok := p.last[part]; ok {
		p.gap[part] += now.Sub(l)
		p.gapN[part]++
	}
	p.mu.Unlock()
}

func (p *profiler) handlerEnd(part int32, slept time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.last[part] = time.Now()
	p.slep += slept
	p.n++
	p.mu.Unlock()
}

func (p *profiler) finish(pool *pgxpool.Pool) {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	if p.cpu != nil {
		pprof.StopCPUProfile()
		p.cpu.Close()
	}
	for _, name := range []string{"block", "mutex"} {
		if f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("%s-%d.pprof", name, os.Getpid()))); err == nil {
			_ = pprof.Lookup(name).WriteTo(f, 0)
			f.Close()
		}
	}
	f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("breakdown-%d.txt", os.Getpid())))
	if err != nil {
		return
	}
	defer f.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n > 0 {
		fmt.Fprintf(f, "handlers %d, slept on average %s\n", p.n, p.slep/time.Duration(p.n))
	}
	var parts []int32
	for k := range p.gap {
		parts = append(parts, k)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, k := range parts {
		fmt.Fprintf(f, "partition %d: between handlers on average %s (%d)\n", k, p.gap[k]/time.Duration(p.gapN[k]), p.gapN[k])
	}
	s := pool.Stat()
	fmt.Fprintf(f, "pool: acquires %d, empty acquires %d, acquire wait %s, max conns %d\n", s.AcquireCount(), s.EmptyAcquireCount(), s.AcquireDuration(), s.MaxConns())
	var ws []string
	for k := range p.wait {
		ws = append(ws, k)
	}
	sort.Slice(ws, func(i, j int) bool { return p.wait[ws[i]] > p.wait[ws[j]] })
	for _, k := range ws {
		fmt.Fprintf(f, "pg_stat_activity %s: %d samples\n", k, p.wait[k])
	}
}
