package sink

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// zapLogger adapts zap to franz-go's logger.
type zapLogger struct {
	l *zap.Logger
	// batchFailed, if set, is called with the topic ("" for every topic)
	// when the client logs that it fails records (failedLines): franz-go
	// logs those lines before it fails the records, most of them holding
	// the partition's lock (Sink.held).
	batchFailed func(topic string)
}

// failedLine is a line franz-go logs just before it fails buffered
// records, and which of them.
type failedLine struct {
	msg   string
	scope string // "topic": the records of the partition in keyval topic; "all": every buffered record; "canceled": the partitions whose first record's context has ended
	when  string // if set, a keyval that must be true (the line is logged either way)
}

// failedLines are the lines franz-go (the version go.mod names; see
// TestFailedLinesAreFranzGos) logs at info or above before failing
// records, from pkg/kgo's sink.go and producer.go. The paths that log
// nothing first: a record refused before it is buffered (its topic's
// metadata has a lasting error, no usable partition, the client closing),
// a merged batch a downgraded broker cannot take, a partition abandoned as
// its topic was recreated (every later record of it fails too), and the
// records that held, the produce context or an aborted transaction end;
// for those the first signal is the record's promise (txAcks.done, which
// holds) or kafkaHook's OnProduceRecordUnbuffered, just before it.
var failedLines = []failedLine{
	// A produce response failed the batch (sink.go handleReqRespBatch).
	{msg: "batch in a produce request failed", scope: "topic"},
	// OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID,
	// INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH with
	// StopProducerOnDataLossDetected or a transactional id.
	{msg: "batch errored, failing the producer ID", scope: "topic"},
	// The partition's metadata or producer id failed it (bumpRepeatedLoadErr).
	{msg: "produce partition load error, bumping error count on first stored batch", scope: "topic", when: "will_fail"},
	// A new topic's partitions never loaded (producer.go waitUnknownTopic).
	{msg: "new topic metadata wait failed, done retrying, failing all records", scope: "topic"},
	// The first record of a partition had its context ended.
	// Only the partitions whose first record's context has ended: a held
	// sink's (a shared client's other sinks go on, canceledScope).
	{msg: "the first record in some partition(s) had a context cancelation; failing all relevant partitions", scope: "canceled"},
	{msg: "fatal InitProducerID error, failing all buffered records", scope: "all"},
	{msg: "fatal AddPartitionsToTxn error, failing all buffered records (it is possible the client can recover after EndTransaction)", scope: "all"},
	{msg: "broker cannot handle any produce request we can issue, failing records", scope: "all"},
}

// failedScope says whether msg with keyvals is a line of failedLines, and
// the topic whose records fail ("" for every topic).
func failedScope(msg string, keyvals []any) (topic string, ok bool) {
	for _, f := range failedLines {
		if f.msg != msg {
			continue
		}
		when := f.when == ""
		for i := 0; i+1 < len(keyvals); i += 2 {
			switch k, _ := keyvals[i].(string); {
			case k == "topic" && f.scope == "topic":
				topic, _ = keyvals[i+1].(string)
			case k == f.when && f.when != "":
				when, _ = keyvals[i+1].(bool)
			}
		}
		if f.scope == "canceled" {
			topic = canceledScope
		}
		return topic, when
	}
	return "", false
}

// canceledScope is the topic batchFailed is given for records failed
// because the first record of their partition had its context ended (no
// topic can be named so): a sink's own client holds the sink, as for every
// topic; a shared client holds only the sinks that share a topic with a
// held one (sharedGen.failed).
const canceledScope = "\x00canceled"

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
	if z.batchFailed != nil {
		if topic, ok := failedScope(msg, keyvals); ok {
			z.batchFailed(topic)
		}
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
