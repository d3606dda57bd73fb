package inbox

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// SlogLogger returns a *zap.Logger that writes to l, for New, so that an
// application logging with log/slog gets the Consumer's lines on its own
// handler: inbox.New(cfg, inbox.SlogLogger(slog.Default())). Simpler:
// Config.Logger takes l as it is (Config{Logger: slog.Default()}). Levels map
// debug, info, warn and error to slog's; the logger's name ("inbox") is
// the attribute logger; each zap field becomes an attribute.
func SlogLogger(l *slog.Logger) *zap.Logger { return zap.New(&slogCore{h: l.Handler()}) }

// slogCore is a zapcore.Core over a slog.Handler.
type slogCore struct{ h slog.Handler }

func (s *slogCore) Enabled(l zapcore.Level) bool {
	return s.h.Enabled(context.Background(), slogLevel(l))
}

func (s *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{h: s.h.WithAttrs(slogAttrs(fs))}
}

func (s *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if s.Enabled(e.Level) {
		return ce.AddCore(e, s)
	}
	return ce
}

func (s *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(slogAttrs(fs)...)
	return s.h.Handle(context.Background(), r)
}

func (s *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// slogAttrs converts fields in their order (a field may give several
// keys: zap.Error's error and errorVerbose).
func slogAttrs(fs []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fs))
	for _, f := range fs {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		if v, ok := enc.Fields[f.Key]; ok {
			out = append(out, slog.Any(f.Key, v))
		}
		for k, v := range enc.Fields {
			if k != f.Key {
				out = append(out, slog.Any(k, v))
			}
		}
	}
	return out
}
