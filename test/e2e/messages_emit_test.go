package e2e

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
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

// TestMessageNotUTF8DeadLettered: a message emitted as bytes that are not
// UTF-8 (pg_logical_emit_message's bytea form; PostgreSQL sends a
// message's content as it is, never converted) is dead-lettered with every
// byte kept (bytea's hex form), never relayed as JSON; the messages around
// it arrive and the slot moves past it.
func TestMessageNotUTF8DeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq := e.Prefix + ".dlq"
	c := e.Collect(t)
	dc := e.CollectRE(t, "^"+regexp.QuoteMeta(dlq)+"$")
	relay := e.Start(t, "--source", "tables,messages", "--dlq-topic", dlq)
	relay.WaitStreaming()
	content := func(id, note string) string {
		return fmt.Sprintf(`{"id": %q, "aggregatetype": %q, "aggregateid": "k", "type": "T", "payload": {"note": %q}}`, id, e.AggType(0), note)
	}
	good1, bad, good2 := harness.NewUUID(), harness.NewUUID(), harness.NewUUID()
	// N.B. with a business row: pgoutput looks the publication up at the
	// first row change.
	e.Bed.Exec(t, e.DSN, `WITH o AS (INSERT INTO orders (customer, total) VALUES ('c', 1) RETURNING id)
		SELECT pg_logical_emit_message(true, 'outbox', $1::text),
			pg_logical_emit_message(true, 'outbox', convert_to($2::text, 'LATIN1')),
			pg_logical_emit_message(true, 'outbox', $3::text) FROM o`,
		content(good1, "café"), content(bad, "café"), content(good2, "ü"))
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "the slot to move past the messages", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	var got []string
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		got = append(got, id)
		if !utf8.Valid(r.Value) {
			t.Errorf("record %s: value %q is not UTF-8", id, r.Value)
		}
	}
	if !slices.Equal(got, []string{good1, good2}) {
		t.Errorf("records %q, want %q (the UTF-8 messages around the other)", got, []string{good1, good2})
	}
	dead := dc.ToEnd()
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	latin1 := strings.ReplaceAll(content(bad, "café"), "é", "\xe9")
	want := mustJSON(t, map[string]string{"content": `\x` + hex.EncodeToString([]byte(latin1))})
	cls, _ := harness.Header(dead[0], "walrelay.error.class")
	if cls != "bad_value" || string(dead[0].Value) != want {
		t.Errorf("dead letter class %q value %s, want bad_value %s", cls, dead[0].Value, want)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
