package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestUnsupportedMappedColumnRefused: a mapped column whose type its flag
// does not take, or that pgoutput does not send (a stored generated column
// before PostgreSQL 18), stops walrelay at start with exit 2 and the fix,
// before any slot exists; it never relays around it.
func TestUnsupportedMappedColumnRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN part integer, ADD COLUMN doc jsonb,
		ADD COLUMN derived jsonb GENERATED ALWAYS AS (payload) STORED`)
	var version int
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	generated := "pgoutput sends generated columns only from PostgreSQL 18"
	if version >= 180000 {
		generated = `run ALTER PUBLICATION "` + e.Pub + `" SET (publish_generated_columns = stored)`
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"integer payload", []string{"--payload-column", "part"},
			[]string{`outbox.part (named by --payload-column) has type integer`, "--payload-column takes jsonb, json, text, varchar, bytea"}},
		{"jsonb key", []string{"--key-column", "doc"},
			[]string{`outbox.doc (named by --key-column) has type jsonb`, "--key-column takes text, varchar, char, uuid, bigint, integer, smallint"}},
		{"generated payload", []string{"--payload-column", "derived"},
			[]string{`outbox.derived (named by --payload-column) is GENERATED ALWAYS ... STORED`, generated}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			relay := e.Start(t, c.args...)
			code := relay.Wait(30 * time.Second)
			if code != 2 {
				t.Errorf("exit code %d, want 2; log:\n%s", code, relay.Log())
			}
			for _, w := range c.want {
				if !strings.Contains(relay.Log(), w) {
					t.Errorf("log lacks %q:\n%s", w, relay.Log())
				}
			}
			if e.Bed.Slot(t, e.DSN, e.Slot).Exists {
				t.Errorf("a refused start created slot %s", e.Slot)
			}
		})
	}
}

// TestUnmappableTableStops: when an outbox table stops being mappable
// while walrelay runs (its payload column dropped), walrelay stops with
// exit 2 naming the column and its flag, and dead-letters nothing
// (schemachange_test.go has the rename).
func TestUnmappableTableStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq := e.Prefix + ".dlq"
	dc := e.CollectRE(t, "^"+strings.ReplaceAll(dlq, ".", `\.`)+"$")
	relay := e.Start(t, "--dlq-topic", dlq)
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox DROP COLUMN payload`)
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type) VALUES ($1, $2, 'agg-7', 'T')`, harness.NewUUID(), e.AggType(0))
	if code := waitExitOrDeadLetter(t, relay, dc); code != 2 {
		t.Errorf("exit code %d, want 2; log:\n%s", code, relay.Log())
	}
	if log := relay.Log(); !strings.Contains(log, `no column \"payload\" (--payload-column)`) {
		t.Errorf("log does not name the missing column and its flag:\n%s", log)
	}
}
