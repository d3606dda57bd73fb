package inbox

import (
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Logger is what a Consumer writes its lines to (Config.Logger): a message
// and its attributes as key-value pairs. A *slog.Logger is one as it is
// (Config{Logger: slog.Default()}); a *zap.Logger through ZapLogger; any
// other logging library through four methods of its own.
type Logger interface {
	Debug(msg string, keysAndValues ...any)
	Info(msg string, keysAndValues ...any)
	Warn(msg string, keysAndValues ...any)
	Error(msg string, keysAndValues ...any)
}

// ZapLogger returns l as a Logger (its sugared logger's Debugw, Infow,
// Warnw, Errorw).
func ZapLogger(l *zap.Logger) Logger { return zapLogger{l.Sugar()} }

type zapLogger struct{ s *zap.SugaredLogger }

func (z zapLogger) Debug(msg string, kv ...any) { z.s.Debugw(msg, kv...) }
func (z zapLogger) Info(msg string, kv ...any)  { z.s.Infow(msg, kv...) }
func (z zapLogger) Warn(msg string, kv ...any)  { z.s.Warnw(msg, kv...) }
func (z zapLogger) Error(msg string, kv ...any) { z.s.Errorw(msg, kv...) }

// consumerLog is the Consumer's logger: Config.Logger's lines (the
// logger's name as the attribute logger), else log's, else none.
func consumerLog(l Logger, log *zap.Logger) *zap.Logger {
	switch {
	case l != nil:
		return zap.New(&loggerCore{l: l}).Named("inbox")
	case log != nil:
		return log.Named("inbox")
	}
	return zap.NewNop()
}

// loggerCore is a zapcore.Core over a Logger: the Consumer logs with zap
// fields, which become key-value pairs.
type loggerCore struct {
	l    Logger
	with []any
}

// Enabled is true at every level: the Logger filters.
func (c *loggerCore) Enabled(zapcore.Level) bool { return true }

func (c *loggerCore) With(fs []zapcore.Field) zapcore.Core {
	return &loggerCore{l: c.l, with: append(append([]any(nil), c.with...), keyValues(fs)...)}
}

func (c *loggerCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c *loggerCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	kv := make([]any, 0, 2+len(c.with)+2*len(fs))
	if e.LoggerName != "" {
		kv = append(kv, "logger", e.LoggerName)
	}
	kv = append(append(kv, c.with...), keyValues(fs)...)
	switch {
	case e.Level <= zapcore.DebugLevel:
		c.l.Debug(e.Message, kv...)
	case e.Level == zapcore.InfoLevel:
		c.l.Info(e.Message, kv...)
	case e.Level == zapcore.WarnLevel:
		c.l.Warn(e.Message, kv...)
	default:
		c.l.Error(e.Message, kv...)
	}
	return nil
}

func (c *loggerCore) Sync() error { return nil }

// keyValues converts fields to key-value pairs, in their order.
func keyValues(fs []zapcore.Field) []any {
	out := make([]any, 0, 2*len(fs))
	for _, a := range slogAttrs(fs) {
		out = append(out, a.Key, a.Value.Any())
	}
	return out
}

// N.B. a *slog.Logger is a Logger without an adapter.
var _ Logger = (*slog.Logger)(nil)
