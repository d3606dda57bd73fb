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

// scrapeMetrics calls each sample of a metric whose name starts with name,
// read from a /metrics URL, with its key (name and labels) and value; false
// when it cannot read the page.
func scrapeMetrics(ctx context.Context, url, name string, each func(key string, v float64)) bool {
	if url == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
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
		each(line[:sp], v)
	}
	return sc.Err() == nil
}

// scrapeGauge reads gauge name (without labels) from a /metrics URL; false
// when it cannot.
func scrapeGauge(ctx context.Context, url, name string) (float64, bool) {
	var v float64
	found := false
	ok := scrapeMetrics(ctx, url, name, func(key string, x float64) {
		if key == name {
			v, found = x, true
		}
	})
	return v, ok && found
}

// scrapeHistogram reads histogram name from a /metrics URL; nil when it
// cannot.
func scrapeHistogram(ctx context.Context, url, name string) *histogram {
	h := &histogram{buckets: map[float64]float64{}}
	ok := scrapeMetrics(ctx, url, name, func(key string, v float64) {
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
	})
	if !ok {
		return nil
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
