package kafkaside

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// TestCheckpointTopicMustBeCompacted: the slot markers need a compacted
// topic: a deleting one, or a missing one under --create-topics=false,
// stops walrelay with exit 2 and the command that fixes it, before any slot
// is created; with --create-topics walrelay creates it compacted.
func TestCheckpointTopicMustBeCompacted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deleting := e.Prefix + ".checkpoints-delete"
	e.Bed.CreateTopicWith(t, deleting, 1, map[string]string{"cleanup.policy": "delete"})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"deleting topic", []string{"--checkpoint-topic", deleting}, "--add-config cleanup.policy=compact"},
		{"missing topic, --create-topics=false", []string{"--checkpoint-topic", e.Prefix + ".checkpoints-missing", "--create-topics=false"}, "--config cleanup.policy=compact"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			relay := e.Start(t, tc.args...)
			if code := relay.Wait(time.Minute); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if !strings.Contains(relay.Log(), tc.want) {
				t.Errorf("walrelay's output lacks %q; log:\n%s", tc.want, relay.Log())
			}
			if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
				t.Errorf("walrelay created slot %s", e.Slot)
			}
		})
	}
	created := e.Prefix + ".checkpoints-created"
	relay := e.Start(t, "--checkpoint-topic", created)
	relay.WaitStreaming()
	recs := e.Bed.ConsumeAll(t, []string{created}, time.Second)
	if len(recs) == 0 {
		t.Fatalf("no marker record in %s", created)
	}
	if want := "marker/"; !strings.HasPrefix(string(recs[0].Key), want) || !strings.HasSuffix(string(recs[0].Key), "/"+e.Slot) {
		t.Errorf("marker key %q, want marker/<system>/<database>/%s", recs[0].Key, e.Slot)
	}
	out, code := e2etest.RunCmd(t, e, "check", "--checkpoint-topic", created)
	if code != 0 || !strings.Contains(out, "PASS  checkpoint topic "+created+": exists, 1 partition(s), cleanup.policy=compact") {
		t.Errorf("walrelay check (exit %d) does not pass the created topic:\n%s", code, out)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
