package sink

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/topicready"
)

// awaitLeaders waits until every partition of topics, just created, answers
// on its leader (topicready.AwaitLeaders), for at most the delivery timeout.
func (s *Sink) awaitLeaders(ctx context.Context, topics []string) error {
	began := time.Now()
	tries, err := topicready.AwaitLeaders(ctx, s.cl, topics, s.cfg.DeliveryTimeout)
	if err == nil {
		s.log.Debug("created topics answer on every partition's leader", zap.Strings("topics", topics),
			zap.Int("tries", tries), zap.Duration("waited", time.Since(began)))
	}
	return err
}
