package e2e

import (
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// TestOneProcessorPerPipeline: `walrelay run` of one pipeline runs its
// goroutines on one processor (the Go runtime's own gauge,
// go_sched_gomaxprocs_threads, reads 1 on the test machines' two cores or
// more, where the runtime's default is the number of cores), and a
// GOMAXPROCS in its environment wins. docs/performance.md, "One processor
// for one pipeline".
func TestOneProcessorPerPipeline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		environ []string
		want    float64
	}{
		{"default", nil, 1},
		{"GOMAXPROCS=3", []string{"GOMAXPROCS=3"}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := e2etest.NewEnv(t)
			relay := e.StartEnv(t, c.environ)
			relay.WaitStreaming()
			if got := relay.Metric("go_sched_gomaxprocs_threads"); got != c.want {
				t.Fatalf("go_sched_gomaxprocs_threads = %v, want %v", got, c.want)
			}
		})
	}
}
