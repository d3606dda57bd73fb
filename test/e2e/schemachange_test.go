package e2e

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// waitExitOrDeadLetter waits until relay exits (its code) or dlq holds a
// record (the test fails with it): a schema change must stop walrelay, never
// turn rows into dead letters.
func waitExitOrDeadLetter(t *testing.T, relay *relayProc, dlq *collector) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !relay.Exited() {
		if dlq.Len() > 0 {
			msg, _ := harness.Header(dlq.Records()[0], "walrelay.error.message")
			t.Fatalf("a row was dead-lettered after the schema change instead of walrelay stopping: %s; log:\n%s", msg, relay.Log())
		}
		if time.Now().After(deadline) {
			t.Fatalf("walrelay neither stopped nor dead-lettered within 2 minutes; log:\n%s", relay.Log())
		}
		time.Sleep(100 * time.Millisecond) // poll the two conditions
	}
	return relay.Wait(time.Minute)
}

// TestMappedColumnRenamedStops: a mapped column renamed while walrelay
// streams (ALTER TABLE outbox RENAME COLUMN aggregateid TO aggregate_id) is a
// configuration change: walrelay stops with exit 2 and names the flag to
// set, dead-letters nothing, and confirms nothing from the transaction whose
// Relation message shows the change on; started again with that flag, it
// relays every row, those before the rename and those after.
func TestMappedColumnRenamedStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq := e.Prefix + ".dlq"
	c := e.Collect(t)
	dc := e.CollectRE(t, "^"+strings.ReplaceAll(dlq, ".", `\.`)+"$")
	relay := e.Start(t, "--dlq-topic", dlq)
	relay.WaitStreaming()
	var ids []string
	insert := func(keyCol string, n int) {
		for i := 0; i < n; i++ {
			id := harness.NewUUID()
			ids = append(ids, id)
			e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, `+keyCol+`, type, payload) VALUES ($1, $2, 'agg-1', 'T', '{}')`, id, e.AggType(i))
		}
	}
	insert("aggregateid", 3)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox RENAME COLUMN aggregateid TO aggregate_id`)
	// N.B. every transaction after this position carries the new column
	// name: the first insert's Relation message shows the rename.
	before := e.Bed.CurrentWALLSN(t, e.DSN)
	insert("aggregate_id", 3)

	code := waitExitOrDeadLetter(t, relay, dc)
	if code != 2 {
		t.Errorf("exit code %d, want 2; log:\n%s", code, relay.Log())
	}
	if !strings.Contains(relay.Log(), "--key-column aggregate_id") {
		t.Errorf("log does not name the flag to set (--key-column aggregate_id):\n%s", relay.Log())
	}
	if dead := dc.ToEnd(); len(dead) > 0 {
		t.Errorf("%d rows dead-lettered, want none", len(dead))
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.ConfirmedFlushLSN > before {
		t.Errorf("slot confirmed at %s, past %s where the transaction showing the rename begins", s.ConfirmedFlushLSN, before)
	}

	relay = e.Start(t, "--dlq-topic", dlq, "--key-column", "aggregate_id")
	relay.WaitStreaming()
	c.WaitFor(len(ids), 2*time.Minute)
	got := map[string]bool{}
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		got[id] = true
	}
	var missing []string
	for _, id := range ids {
		if !got[id] {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("after the restart with --key-column aggregate_id, %d of %d rows missing: %v", len(missing), len(ids), missing)
	}
	if dead := dc.ToEnd(); len(dead) > 0 {
		t.Errorf("%d rows dead-lettered after the restart, want none", len(dead))
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// TestMappedColumnDroppedStops: a column the mapping needs dropped while
// walrelay streams (the header column type, --header-columns type:eventType)
// stops walrelay with exit 2 naming the flag; nothing is dead-lettered.
func TestMappedColumnDroppedStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq := e.Prefix + ".dlq"
	dc := e.CollectRE(t, "^"+strings.ReplaceAll(dlq, ".", `\.`)+"$")
	relay := e.Start(t, "--dlq-topic", dlq)
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox DROP COLUMN type`)
	before := e.Bed.CurrentWALLSN(t, e.DSN)
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, payload) VALUES ($1, $2, 'agg-1', '{}')`, harness.NewUUID(), e.AggType(0))
	code := waitExitOrDeadLetter(t, relay, dc)
	if code != 2 {
		t.Errorf("exit code %d, want 2; log:\n%s", code, relay.Log())
	}
	if !strings.Contains(relay.Log(), "--header-columns") || !strings.Contains(relay.Log(), `"type"`) {
		t.Errorf("log does not name the column and its flag (--header-columns):\n%s", relay.Log())
	}
	if dead := dc.ToEnd(); len(dead) > 0 {
		t.Errorf("%d rows dead-lettered, want none", len(dead))
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.ConfirmedFlushLSN > before {
		t.Errorf("slot confirmed at %s, past %s", s.ConfirmedFlushLSN, before)
	}
}

// TestMappedColumnRenamedWhileStopped: rows committed while walrelay was
// stopped, then a rename of the key column, then more rows: started with
// the new name (--key-column aggregate_id), walrelay relays every row, those
// written under the old name too (mapped by the column's place), and
// dead-letters none.
func TestMappedColumnRenamedWhileStopped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq := e.Prefix + ".dlq"
	c := e.Collect(t)
	dc := e.CollectRE(t, "^"+strings.ReplaceAll(dlq, ".", `\.`)+"$")
	relay := e.Start(t, "--dlq-topic", dlq)
	relay.WaitStreaming()
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	keys := map[string]string{}
	insert := func(keyCol, key string) {
		id := harness.NewUUID()
		keys[id] = key
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, `+keyCol+`, type, payload) VALUES ($1, $2, $3, 'T', '{}')`, id, e.AggType(0), key)
	}
	insert("aggregateid", "before-1")
	insert("aggregateid", "before-2")
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox RENAME COLUMN aggregateid TO aggregate_id`)
	insert("aggregate_id", "after-1")

	relay = e.Start(t, "--dlq-topic", dlq, "--key-column", "aggregate_id")
	relay.WaitStreaming()
	c.WaitFor(len(keys), 2*time.Minute)
	got := map[string]string{}
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		got[id] = string(r.Key)
	}
	for id, key := range keys {
		if got[id] != key {
			t.Errorf("event %s: key %q, want %q (records: %v)", id, got[id], key, got)
		}
	}
	if dead := dc.ToEnd(); len(dead) > 0 {
		msg, _ := harness.Header(dead[0], "walrelay.error.message")
		t.Errorf("%d rows dead-lettered, want none: %s", len(dead), msg)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
