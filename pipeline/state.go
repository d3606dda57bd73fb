package pipeline

import (
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/metrics"
)

// Healthy reports whether the process runs and its loops turn, and if not,
// why (for /healthz).
func (r *Relay) Healthy() (bool, string) {
	limit := max(3*r.rc.StatusInterval, 30*time.Second)
	last := time.Unix(0, r.beat.Load())
	if p := r.current.Load(); p != nil && p.stream.Beat().After(last) {
		last = p.stream.Beat()
	}
	if age := time.Since(last); age > limit {
		return false, fmt.Sprintf("no loop has turned for %s", age.Round(time.Second))
	}
	return true, ""
}

// Ready reports whether this instance holds the slot and streams, and
// Kafka answers; if not, why (for /readyz).
func (r *Relay) Ready() (bool, string) {
	p := r.current.Load()
	switch {
	case p == nil || !p.stream.Streaming():
		state := r.metrics.State()
		// N.B. an error that repeats (a walsender failing on the same row)
		// shows here, not only in the log.
		if f := r.failure.Load(); f != nil && state == metrics.StateRestarting {
			return false, "not streaming: " + state + " after: " + *f
		}
		if w := r.waitingFor.Load(); w != nil && state == metrics.StateWaiting {
			return false, "not streaming: " + state + ": " + *w
		}
		return false, "not streaming: " + state
	}
	if held := r.held.reason.Load(); held != nil {
		return false, *held
	}
	if w := p.snk.Waiting(); w != "" {
		return false, w
	}
	if at := r.kafkaAnswered.Load(); at == 0 {
		return false, "kafka does not answer"
	} else if quiet := time.Since(time.Unix(0, at)); quiet > r.kafkaGrace() {
		return false, fmt.Sprintf("kafka has not answered for %s", quiet.Round(time.Second))
	}
	return true, ""
}

// kafkaGrace is how long Kafka may leave the watch loop's pings
// unanswered before /readyz says so: three of its polls, and at least 15 s,
// so that one slow answer on a busy machine does not make the relay
// unready; a ping may take all of it (kafkaPings).
func (r *Relay) kafkaGrace() time.Duration {
	return max(3*r.pollInterval(), 15*time.Second)
}

// pollInterval is how often the watch loop polls the slot and pings
// Kafka: every status interval, at most every 5 s.
func (r *Relay) pollInterval() time.Duration { return min(r.rc.StatusInterval, 5*time.Second) }

// register gives the metrics the gauges read from the running attempt
// (0 while none runs).
func (r *Relay) register() {
	read := func(f func(p *attemptState) float64) func() float64 {
		return func() float64 {
			if p := r.current.Load(); p != nil {
				return f(p)
			}
			return 0
		}
	}
	r.metrics.ReadFrom(metrics.Gauges{
		InflightEvents: read(func(p *attemptState) float64 {
			recs, _, _ := p.tr.InFlight()
			return float64(recs)
		}),
		InflightBytes: read(func(p *attemptState) float64 { return float64(p.snk.InflightBytes()) }),
		OldestUnackedSeconds: read(func(p *attemptState) float64 {
			if _, _, oldest := p.tr.InFlight(); !oldest.IsZero() {
				return time.Since(oldest).Seconds()
			}
			return 0
		}),
		ReceivedLSN:     read(func(p *attemptState) float64 { return float64(p.stream.Received()) }),
		ConfirmedLSN:    read(func(p *attemptState) float64 { return float64(p.stream.Confirmed()) }),
		ServerWALEndLSN: read(func(p *attemptState) float64 { return float64(p.stream.ServerWALEnd()) }),
		Ready: func() float64 {
			if ok, _ := r.Ready(); ok {
				return 1
			}
			return 0
		},
	})
}
