package rig

import (
	"sync"
	"time"

	"github.com/walrelay/walrelay/internal/procstat"
)

// RSSPoint is a process's resident set (VmRSS) at T seconds after its
// sampler started.
type RSSPoint struct {
	T   float64 `json:"t_s"`
	MiB float64 `json:"rss_mib"`
}

// RSSSampler reads a process's VmRSS at a fixed interval, so that steady
// and peak memory can be told apart.
type RSSSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	pts  []RSSPoint
}

// SampleRSS starts sampling pid every interval.
func SampleRSS(pid int, every time.Duration) *RSSSampler {
	s := &RSSSampler{stop: make(chan struct{}), done: make(chan struct{})}
	begin := time.Now()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if kb := procstat.StatusKB(pid, "VmRSS"); kb > 0 {
				s.mu.Lock()
				s.pts = append(s.pts, RSSPoint{T: float64(time.Since(begin).Milliseconds()) / 1000, MiB: float64(kb*10/1024) / 10})
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the points.
func (s *RSSSampler) Stop() []RSSPoint {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pts
}

// SteadyMiB is the median of the points after the first skip seconds (the
// start-up), 0 when there are none.
func SteadyMiB(pts []RSSPoint, skip float64) float64 {
	var xs []float64
	for _, p := range pts {
		if p.T >= skip {
			xs = append(xs, p.MiB)
		}
	}
	if len(xs) == 0 {
		return 0
	}
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
	return xs[len(xs)/2]
}
