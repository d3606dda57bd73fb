package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestTwoPhaseSlotRefused: a slot created with two_phase = true makes
// PostgreSQL send prepared transactions at PREPARE, in messages walrelay
// cannot decode; run and check refuse it at start (exit 2, naming the
// fix), and nothing is confirmed.
func TestTwoPhaseSlotRefused(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput', false, true)`, e.Slot))
	t.Cleanup(func() { e.Bed.Exec(t, e.DSN, fmt.Sprintf(`SELECT pg_drop_replication_slot('%s')`, e.Slot)) })
	var twoPhase bool
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT two_phase FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&twoPhase); err != nil || !twoPhase {
		t.Fatalf("slot %s: two_phase %v, %v; want true", e.Slot, twoPhase, err)
	}
	before := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(0))

	hint := fmt.Sprintf(`replication slot %q was created with two_phase = true`, e.Slot)
	fix := fmt.Sprintf(`choose another --slot, or drop it and let walrelay create it without two_phase (SELECT pg_drop_replication_slot('%s');`, e.Slot)
	for _, args := range [][]string{e.Args("run"), e.Args("check")} {
		code, out := e2etest.RunFor(t, time.Minute, nil, args...)
		if code != 2 || !strings.Contains(out, hint) || !strings.Contains(out, fix) {
			t.Errorf("walrelay %s: exit %d, want 2 with %q and %q:\n%s", args[0], code, hint, fix, out)
		}
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Active || s.ConfirmedFlushLSN != before {
		t.Errorf("slot %s: active %v, confirmed_flush_lsn %s; want inactive at %s, where it was created", e.Slot, s.Active, s.ConfirmedFlushLSN, before)
	}
}
