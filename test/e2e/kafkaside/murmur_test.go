package kafkaside

import (
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// The vectors of Kafka's UtilsTest.testMurmur2.
func TestMurmur2MatchesKafka(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		if got := e2etest.Murmur2([]byte(c.in)); got != c.want {
			t.Errorf("e2etest.Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
