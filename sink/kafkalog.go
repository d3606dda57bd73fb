package sink

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// zapLogger adapts zap to franz-go's logger.
type zapLogger struct {
	l *zap.Logger
	// batchFailed, if set, is called with the topic when the client logs
	// that Kafka failed a batch: franz-go does so holding the partition's
	// lock, before it fails the batch's records (Sink.held).
	batchFailed func(topic string)
}

// batchFailedMsg is what franz-go (v1.22) logs, at info, when a batch in a
// produce response finally failed; TestNothingWrittenAfterARejectedBatch
// pins it.
const batchFailedMsg = "batch in a produce request failed"

func (z zapLogger) Level() kgo.LogLevel {
	// franz-go's info lines (connections, metadata) go to debug.
	switch {
	case z.l.Core().Enabled(zap.DebugLevel):
		return kgo.LogLevelDebug
	case z.batchFailed != nil:
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (z zapLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if msg == batchFailedMsg && z.batchFailed != nil {
		topic := ""
		for i := 0; i+1 < len(keyvals); i += 2 {
			if k, _ := keyvals[i].(string); k == "topic" {
				topic, _ = keyvals[i+1].(string)
			}
		}
		z.batchFailed(topic)
	}
	if level >= kgo.LogLevelInfo && (msg == "flushing" || msg == "flushed" || !z.l.Core().Enabled(zap.DebugLevel)) {
		return // N.B. Send and sendLingering flush often
	}
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		k, _ := keyvals[i].(string)
		fields = append(fields, zap.Any(k, keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		z.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		z.l.Warn(msg, fields...)
	default:
		z.l.Debug(msg, fields...)
	}
}
