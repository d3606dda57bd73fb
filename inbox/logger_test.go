package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLoggerAdapters: the Consumer's lines reach a *slog.Logger given as
// Config.Logger as it is, and a *zap.Logger through ZapLogger, with their
// level, the logger name and the fields as attributes.
func TestLoggerAdapters(t *testing.T) {
	var buf bytes.Buffer
	log := consumerLog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), nil)
	log.Debug("not shown")
	log.With(zap.String("group", "g")).Warn("handler failed, retrying", zap.Int32("partition", 2), zap.Error(errors.New("no")))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("one JSON line expected: %q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "WARN", "msg": "handler failed, retrying", "logger": "inbox", "group": "g", "partition": float64(2), "error": "no"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("slog: %s = %v, want %v (line %s)", k, line[k], v, buf.String())
		}
	}

	core, seen := observer.New(zapcore.InfoLevel)
	log = consumerLog(ZapLogger(zap.New(core)), nil)
	log.Debug("not shown")
	log.Info("partitions assigned", zap.Strings("partitions", []string{"t/0"}), zap.Int32("generation", 3))
	if es := seen.All(); len(es) != 1 {
		t.Fatalf("zap: %d entries, want 1: %v", len(es), es)
	}
	e := seen.All()[0]
	got := e.ContextMap()
	if e.Message != "partitions assigned" || e.Level != zapcore.InfoLevel || got["logger"] != "inbox" || fmt.Sprint(got["generation"]) != "3" {
		t.Errorf("zap: entry %q %s %v, want partitions assigned at info with logger inbox and generation 3", e.Message, e.Level, got)
	}
}

// TestLoggerBothRefused: Config.Logger and New's *zap.Logger together
// are refused.
func TestLoggerBothRefused(t *testing.T) {
	cfg := Config{Brokers: []string{"b:9092"}, Group: "g", Topics: []string{"t"}, Handler: record, Logger: slog.Default()}
	_, err := New(cfg, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "both Config.Logger and New's *zap.Logger") {
		t.Errorf("New with both loggers: %v, want refused", err)
	}
}
