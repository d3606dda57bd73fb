package fleet

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/budget"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pipeline"
	"github.com/walrelay/walrelay/sink"
)

// inflightKey at the top of the file is the process's in-flight bound:
// what every pipeline's records buffered or in flight to Kafka may hold
// together, besides each pipeline's own max-inflight-bytes.
const inflightKey = "max-inflight-bytes"

// defaultProcessInflight is the process's bound when the file sets none
// (or the largest pipeline's own bound, if more): sixteen pipelines'
// default bounds. Fewer pipelines than that never meet it.
const defaultProcessInflight = 16 * sink.DefaultMaxInflightBytes

// inflightStall is how long a pipeline waits for room under the process's
// bound before /readyz and the log say so.
const inflightStall = time.Second

// processInflight reads the process's in-flight bound of the file (data)
// and checks each pipeline's own bound against it. It returns the pool
// the pipelines share, nil when their own bounds together are within it
// (it would never bind), and the mistakes: a value the flag does not
// take, or a pipeline's own bound above the process's.
func processInflight(data []byte, newPipeline NewPipeline, plans []plan) (*budget.Pool, []mistake) {
	f, _ := parseFile(data) // its mistakes are load's
	var sum, largest int64
	for _, p := range plans {
		own := ownInflight(p.cfg)
		sum += own
		largest = max(largest, own)
	}
	e, set := f.top.lookup(inflightKey)
	if !set {
		if limit := max(defaultProcessInflight, largest); limit < sum {
			return budget.NewPool(limit, len(plans)), nil
		}
		return nil, nil
	}
	fs, _ := newPipeline()
	if err := fs.Set(inflightKey, e.value); err != nil {
		return nil, []mistake{{line: e.line, msg: fmt.Sprintf("%s: %q: %v", inflightKey, e.value, err)}}
	}
	limit, _ := strconv.ParseInt(fs.Lookup(inflightKey).Value.String(), 10, 64)
	if limit <= 0 {
		return nil, []mistake{{line: e.line, msg: fmt.Sprintf("%s: %q: want the bytes every pipeline's records may hold together, e.g. 256MiB", inflightKey, e.value)}}
	}
	var ms []mistake
	for i, p := range plans {
		if own := ownInflight(p.cfg); own > limit {
			// N.B. at the line that sets it: the pipeline's, the defaults'.
			line := p.line
			if d, ok := f.defaults.lookup(inflightKey); ok {
				line = d.line
			}
			if i < len(f.pipelines) {
				if o, ok := f.pipelines[i].lookup(inflightKey); ok {
					line = o.line
				}
			}
			ms = append(ms, mistake{line: line, pipeline: p.name, msg: fmt.Sprintf(
				"max-inflight-bytes %s is more than the process's max-inflight-bytes %s (line %d), which every pipeline shares: lower the pipeline's (under it or under defaults:) or raise the process's at the top of the file",
				bytesText(float64(own)), bytesText(float64(limit)), e.line)})
		}
	}
	if len(ms) > 0 || limit >= sum {
		return nil, ms
	}
	return budget.NewPool(limit, len(plans)), nil
}

// ownInflight is a pipeline's own in-flight bound.
func ownInflight(c pipeline.Config) int64 {
	if c.Sink.MaxInflightBytes == 0 {
		return sink.DefaultMaxInflightBytes
	}
	return int64(c.Sink.MaxInflightBytes)
}

// inflightAccount gives a pipeline its account of pool (nil: none).
func inflightAccount(pool *budget.Pool, c *pipeline.Config) *budget.Account {
	if pool == nil {
		return nil
	}
	a := pool.Account()
	c.Sink.InflightPool = a
	return a
}

// readInflightWait makes m report how long a has waited for room, as
// walrelay_inflight_process_wait_seconds.
func readInflightWait(m *metrics.Metrics, a *budget.Account) {
	m.ReadInflightWait(func() float64 {
		if since := a.WaitingSince(); !since.IsZero() {
			return time.Since(since).Seconds()
		}
		return 0
	})
}

// processMemoryLimit is the Go memory limit of the pipelines (sum: each
// one's pipeline.Config.MemoryLimit), their in-flight bounds counted as
// the process's when it binds.
func processMemoryLimit(sum int64, plans []plan, pool *budget.Pool) int64 {
	if pool == nil {
		return sum
	}
	for _, p := range plans {
		sum -= ownInflight(p.cfg)
	}
	return sum + pool.Limit()
}

// inflightWaits are the pipelines waiting for room under the process's
// bound for inflightStall or longer, for /readyz.
func (f *fleet) inflightWaits() []string {
	var out []string
	for _, m := range f.members {
		if m.inflight == nil {
			continue
		}
		if since := m.inflight.WaitingSince(); !since.IsZero() && time.Since(since) >= inflightStall {
			out = append(out, fmt.Sprintf("%s: %s", m.name, f.inflightWhy(since)))
		}
	}
	return out
}

// inflightWhy says why a pipeline waiting since since waits.
func (f *fleet) inflightWhy(since time.Time) string {
	return fmt.Sprintf("waiting %s for room under the process's max-inflight-bytes %s (every pipeline's records together: %s): its reserved share (%s) is full and the rest is held by the pipelines' records Kafka has not acknowledged yet",
		time.Since(since).Round(time.Second), bytesText(float64(f.pool.Limit())), bytesText(float64(f.pool.Used())), bytesText(float64(f.pool.Reserve())))
}

// watchInflight logs each wait for room under the process's bound that
// lasts inflightStall, once, and its end, until ctx is done.
func (f *fleet) watchInflight(ctx context.Context) {
	if f.pool == nil {
		return
	}
	tick := time.NewTicker(inflightStall / 4)
	defer tick.Stop()
	logged := map[*member]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, m := range f.members {
			since := m.inflight.WaitingSince()
			switch stalled := !since.IsZero() && time.Since(since) >= inflightStall; {
			case stalled && !logged[m]:
				m.log.Warn("pipeline waits for room under the process's in-flight bound", zap.String("why", f.inflightWhy(since)))
				logged[m] = true
			case !stalled && logged[m]:
				m.log.Info("pipeline no longer waits for room under the process's in-flight bound")
				logged[m] = false
			}
		}
	}
}
