package pipeline

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/sink"
)

// TestParkedStatusSaysWhenUnread: status without Kafka settings says the
// parked aggregates were not read, and with a Kafka it cannot reach says
// they are unknown, with the error: never a silent 0.
func TestParkedStatusSaysWhenUnread(t *testing.T) {
	rows, err := ParkedStatus(context.Background(), Config{}, false)
	if err != nil || len(rows) != 1 || !strings.HasPrefix(rows[0].Value, "not read: give --brokers") {
		t.Errorf("without Kafka settings: %v, %v", rows, err)
	}
	// N.B. a port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err = ParkedStatus(ctx, Config{Sink: sink.Config{Brokers: []string{addr}, CheckpointTopic: "walrelay.checkpoints"}}, true)
	if err == nil || len(rows) != 1 || rows[0].Name != "parked_aggregates" || !strings.HasPrefix(rows[0].Value, "unknown: read parked aggregates from state topic walrelay.checkpoints") {
		t.Errorf("Kafka unreachable: %v, %v", rows, err)
	}
}
