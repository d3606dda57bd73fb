package rig

import (
	"sync"
	"time"

	"github.com/walrelay/walrelay/test/proc"
)

// RSSPoint is a process's resident set (VmRSS) at T seconds after its
// sampler started, and of it the anonymous memory (RssAnon: heap, stacks,
// runtime). The rest is mostly file pages: the executable's and its
// libraries', shared with the page cache, which a Go binary's readers map
// far more of than they run (the kernel maps the cached pages around each
// fault).
type RSSPoint struct {
	T       float64 `json:"t_s"`
	MiB     float64 `json:"rss_mib"`
	AnonMiB float64 `json:"rss_anon_mib"`
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
			if kb := proc.StatusKB(pid, "VmRSS"); kb > 0 {
				anon := proc.StatusKB(pid, "RssAnon")
				s.mu.Lock()
				s.pts = append(s.pts, RSSPoint{T: float64(time.Since(begin).Milliseconds()) / 1000, MiB: mib(kb), AnonMiB: mib(anon)})
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

// mib is kB in MiB, to 0.1.
func mib(kb int64) float64 { return float64(kb*10/1024) / 10 }

// SteadyMiB is the median RSS of the points after the first skip seconds
// (the start-up), 0 when there are none.
func SteadyMiB(pts []RSSPoint, skip float64) float64 {
	return steady(pts, skip, func(p RSSPoint) float64 { return p.MiB })
}

// SteadyAnonMiB is SteadyMiB of the anonymous memory.
func SteadyAnonMiB(pts []RSSPoint, skip float64) float64 {
	return steady(pts, skip, func(p RSSPoint) float64 { return p.AnonMiB })
}

func steady(pts []RSSPoint, skip float64, v func(RSSPoint) float64) float64 {
	var xs []float64
	for _, p := range pts {
		if p.T >= skip {
			xs = append(xs, v(p))
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
