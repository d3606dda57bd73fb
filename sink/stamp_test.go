package sink

import (
	"testing"
	"time"
)

// TestStampBounds: the bounds read from a topic's configs, and which
// commit times they put outside (within a margin of half the bound, at
// most the slack).
func TestStampBounds(t *testing.T) {
	now := time.UnixMilli(1800000000000)
	const slack = 4 * time.Minute
	kafkaDefaults := map[string]string{"message.timestamp.type": "CreateTime", "message.timestamp.before.max.ms": "9223372036854775807", "message.timestamp.after.max.ms": "3600000"}
	cases := []struct {
		name    string
		configs map[string]string
		ago     time.Duration // commit time before now (negative: ahead)
		outside bool
	}{
		{"defaults, a week old", kafkaDefaults, 7 * 24 * time.Hour, false},
		{"defaults, 10 minutes ahead", kafkaDefaults, -10 * time.Minute, false},
		{"defaults, 58 minutes ahead", kafkaDefaults, -58 * time.Minute, true},
		{"before 1s, 400ms old", map[string]string{"message.timestamp.before.max.ms": "1000"}, 400 * time.Millisecond, false},
		{"before 1s, 600ms old", map[string]string{"message.timestamp.before.max.ms": "1000"}, 600 * time.Millisecond, true},
		{"before 1h, 50 minutes old", map[string]string{"message.timestamp.before.max.ms": "3600000"}, 50 * time.Minute, false},
		{"before 1h, 57 minutes old", map[string]string{"message.timestamp.before.max.ms": "3600000"}, 57 * time.Minute, true},
		{"difference 1h (before 3.6), ahead", map[string]string{"message.timestamp.difference.max.ms": "3600000"}, -57 * time.Minute, true},
		{"before 0: nothing can meet it", map[string]string{"message.timestamp.before.max.ms": "0"}, time.Hour, false},
		{"log append time", map[string]string{"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1000"}, time.Hour, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := noBounds
			for k, v := range c.configs {
				b.set(k, v)
			}
			if got := b.outside(now.Add(-c.ago), now, slack); got != c.outside {
				t.Errorf("outside = %v, want %v (bounds %+v)", got, c.outside, b)
			}
		})
	}
}
