package replication

import (
	"testing"
	"time"
)

func TestLivenessDeadline(t *testing.T) {
	for _, c := range []struct {
		name             string
		interval, server time.Duration
		want             time.Duration
	}{
		{"server timeout longer: it", time.Second, 60 * time.Second, 60 * time.Second},
		{"four intervals longer: them", 10 * time.Second, 30 * time.Second, 40 * time.Second},
		{"equal", 5 * time.Second, 20 * time.Second, 20 * time.Second},
		{"server timeout disabled (0): four intervals", time.Second, 0, 4 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := livenessDeadline(c.interval, c.server); got != c.want {
				t.Errorf("livenessDeadline(%s, %s) = %s, want %s", c.interval, c.server, got, c.want)
			}
		})
	}
}

func TestParseGUCMillis(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"60s", 60 * time.Second, false},
		{"1min", time.Minute, false},
		{"500ms", 500 * time.Millisecond, false},
		{"2h", 2 * time.Hour, false},
		{"1d", 24 * time.Hour, false},
		{"0", 0, false},
		{"-1", 0, false},
		{"1500", 1500 * time.Millisecond, false},
		{"10 fortnights", 0, true},
		{"", 0, true},
	} {
		got, err := ParseTimeSetting(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseTimeSetting(%q) = %s, %v; want %s, error %v", c.in, got, err, c.want, c.err)
		}
	}
}
