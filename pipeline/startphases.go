package pipeline

import (
	"time"

	"go.uber.org/zap"
)

// startPhases times an attempt's start, phase by phase, for the debug log:
// where a start's time goes (docs/performance.md, "Start-up").
type startPhases struct {
	at   time.Time
	last time.Time
	done []zap.Field
}

// mark ends the phase called name.
func (p *startPhases) mark(name string) {
	now := time.Now()
	from := p.last
	if from.IsZero() {
		from = p.at
	}
	p.done = append(p.done, zap.Duration(name, now.Sub(from)))
	p.last = now
}

// fields are the phases' durations and their total.
func (p *startPhases) fields() []zap.Field {
	return append(p.done, zap.Duration("total", p.last.Sub(p.at)))
}
