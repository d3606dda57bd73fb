package main

import (
	"bufio"
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// histogram is a Prometheus histogram read from walrelay's /metrics.
type histogram struct {
	buckets map[float64]float64 // le -> cumulative count
	sum     float64
	count   float64
}

// scrapeHistogram reads histogram name from a /metrics URL; nil when it
// cannot.
func scrapeHistogram(ctx context.Context, url, name string) *histogram {
	if url == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	h := &histogram{buckets: map[float64]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		key := line[:sp]
		switch {
		case key == name+"_sum":
			h.sum = v
		case key == name+"_count":
			h.count = v
		case strings.HasPrefix(key, name+`_bucket{le="`):
			le := strings.TrimSuffix(strings.TrimPrefix(key, name+`_bucket{le="`), `"}`)
			f, err := strconv.ParseFloat(le, 64)
			if le == "+Inf" {
				f, err = 1e300, nil
			}
			if err == nil {
				h.buckets[f] = v
			}
		}
	}
	return h
}

// Bucketed are figures of a histogram's increase between two scrapes; the
// percentiles are the upper bounds of the buckets they fall in.
type Bucketed struct {
	N      int     `json:"n"`
	MeanMS float64 `json:"mean_ms"`
	P50LE  float64 `json:"p50_at_most_ms"`
	P99LE  float64 `json:"p99_at_most_ms"`
}

func histogramDelta(a, b *histogram) *Bucketed {
	if a == nil || b == nil || b.count <= a.count {
		return nil
	}
	n := b.count - a.count
	out := &Bucketed{N: int(n), MeanMS: round((b.sum-a.sum)/n*1000, 2)}
	les := make([]float64, 0, len(b.buckets))
	for le := range b.buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	q := func(p float64) float64 {
		for _, le := range les {
			if b.buckets[le]-a.buckets[le] >= p*n {
				return le * 1000
			}
		}
		return 0
	}
	out.P50LE, out.P99LE = q(0.5), q(0.99)
	return out
}
