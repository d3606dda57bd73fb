package fleet

import (
	"context"
	"net/http"
	"time"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pipeline"
)

// SinglePage is the status page of a single walrelay (run without
// --config): one row, named after its slot, from relay and m, sampled
// every rateEvery until ctx ends.
func SinglePage(ctx context.Context, relay *pipeline.Relay, m *metrics.Metrics, slot, connString string) http.Handler {
	f := &fleet{members: []*member{{name: slot, slot: slot, db: databaseName(connString), relay: relay, metrics: m}}}
	go func() {
		t := time.NewTicker(rateEvery)
		defer t.Stop()
		for {
			f.sample()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return http.HandlerFunc(f.servePage)
}
