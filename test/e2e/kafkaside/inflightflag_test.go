package kafkaside

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// TestInflightBytesBelowMessageBytesNamesTheFlags: --max-inflight-bytes
// below --kafka-max-message-bytes (one record would never fit) exits 2
// with a message that names both flags, so the user knows what to set.
func TestInflightBytesBelowMessageBytesNamesTheFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, out := e2etest.RunOnce(t, nil, e.Args("run", "--max-inflight-bytes", "65536", "--kafka-max-message-bytes", "1048588")...)
	const want = "--max-inflight-bytes 65536 is below --kafka-max-message-bytes 1048588"
	if code != 2 || !strings.Contains(out, want) {
		t.Errorf("exit code %d, want 2 with %q; output:\n%s", code, want, out)
	}
}
