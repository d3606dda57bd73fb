package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestFleetGroupWaitsForKafkaAtStart: a replica of a group started while
// Kafka is down waits for it, as a single walrelay does, instead of
// exiting: once Kafka is back it prepares the coordination topic, runs
// every pipeline and relays their events.
func TestFleetGroupWaitsForKafkaAtStart(t *testing.T) {
	testbed.Disrupt(t)
	file, envs, _ := groupBed(t)
	envs[0].Bed.StopKafka(t)
	kafkaUp := false
	defer func() {
		if !kafkaUp {
			envs[0].Bed.StartKafka(t)
		}
	}()
	r1 := startReplica(t, envs[0], file, "r1")
	harness.WaitFor(t, 3*time.Minute, "r1 to find it cannot prepare the group's coordination topic", func() bool {
		return strings.Contains(r1.p.Log(), "cannot prepare the group's coordination topic") || r1.p.Exited()
	})
	if r1.p.Exited() {
		t.Fatalf("r1 exited while Kafka was down, want it to wait:\n%s", r1.p.Log())
	}
	envs[0].Bed.StartKafka(t)
	kafkaUp = true
	groupSpread(t, "every pipeline to stream on r1 once Kafka is back", []*replica{r1}, envs)
	rolledBack := write(t, 20, envs...)
	for _, e := range envs {
		readBack(t, e, rolledBack, false)
	}
	if code := r1.p.Stop(time.Minute); code != 0 {
		t.Errorf("r1: exit code %d after SIGTERM, want 0", code)
	}
}
