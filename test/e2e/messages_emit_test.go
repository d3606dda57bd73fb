package e2e

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// TestCheckEmitMatchesFlags: walrelay check fails when walrelay.emit is not
// the function setup creates for its flags: left from another
// --message-prefix (it emits messages walrelay never reads) or from other
// column flags (every event it emits would be poison); and passes with the
// flags setup had.
func TestCheckEmitMatchesFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if out, code := e2etest.RunCmd(t, e, "setup", "--source", "messages", "--message-prefix", "ev", "--role", ""); code != 0 {
		t.Fatalf("walrelay setup exit %d:\n%s", code, out)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"setup's flags", []string{"--message-prefix", "ev"}, 0, "PASS  message source: pgoutput messages on: each pg_logical_emit_message(true, 'ev', json) is an event"},
		{"another prefix", []string{"--message-prefix", "other"}, 2,
			`FAIL  message source: walrelay.emit emits with prefix "ev", --message-prefix is "other": walrelay would never read what it emits`},
		{"the default prefix", nil, 2, `walrelay.emit emits with prefix "ev", --message-prefix is "outbox"`},
		{"another id field", []string{"--message-prefix", "ev", "--id-column", "event_id"}, 2,
			"FAIL  message source: walrelay.emit is not the function setup creates for these flags"},
	}
	for _, c := range cases {
		out, code := e2etest.RunCmd(t, e, "check", append([]string{"--source", "messages"}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: walrelay check exit %d, want %d saying %q:\n%s", c.name, code, c.code, c.want, out)
		}
	}
}
