package decode

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const leafRelID = 16400

// leafRelation is a leaf partition of the outbox, its columns in another
// order (as after ATTACH PARTITION of a table created on its own).
func leafRelation() []byte {
	return msgRelation(leafRelID, "public", "outbox_2025",
		col{name: "payload", oid: pgJSONB}, col{name: "aggregateid", oid: pgText}, col{name: "type", oid: pgText},
		col{name: "aggregatetype", oid: pgText}, col{name: "id", oid: pgUUID, key: true})
}

func leafRow(aggID string) []byte {
	return msgInsert(leafRelID, text(`{"n":1}`), text(aggID), text("T"), text("order"), text(eventUUID))
}

func TestDecodeResolvePartitionRoots(t *testing.T) {
	tests := []struct {
		name       string
		root       string
		exists     bool
		wantEvents int
		wantOther  uint64
		wantLog    string // a warning that must be logged
	}{
		{name: "partition of an outbox", root: "public.outbox", exists: true, wantEvents: 1, wantLog: "arrive under the partition's name"},
		{name: "partition of another table", root: "public.orders", exists: true, wantOther: 1},
		{name: "in no partition tree", root: "", exists: true, wantOther: 1},
		{name: "dropped since", root: "", exists: false, wantOther: 1, wantLog: "no longer exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			d, err := New(Config{ResolvePartitionRoots: true}, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			mustFeed(t, d, msgBegin(commitLSN, commitTime, xid), outboxRelation(pgJSONB))
			if _, _, ok := d.Unresolved(); ok {
				t.Fatalf("an outbox's Relation message waits to be resolved")
			}
			mustFeed(t, d, leafRelation())
			oid, table, ok := d.Unresolved()
			if !ok || oid != leafRelID || table != "public.outbox_2025" {
				t.Fatalf("Unresolved() = %d, %q, %v; want %d, public.outbox_2025, true", oid, table, ok, leafRelID)
			}
			if err := d.Resolve(oid, tt.root, tt.exists); err != nil {
				t.Fatal(err)
			}
			if _, _, ok := d.Unresolved(); ok {
				t.Fatalf("still unresolved after Resolve")
			}
			txs := mustFeed(t, d, leafRow("o-1"), leafRow("o-2"), msgCommit(commitLSN, endLSN, commitTime))
			if len(txs) != 1 {
				t.Fatalf("got %d Tx parts, want 1", len(txs))
			}
			evs := txs[0].Events
			if len(evs) != 2*tt.wantEvents || d.Stats.OtherTables != 2*tt.wantOther {
				t.Fatalf("got %d events and %d other-table rows, want %d and %d", len(evs), d.Stats.OtherTables, 2*tt.wantEvents, 2*tt.wantOther)
			}
			for i, ev := range evs {
				wantKey := []string{"o-1", "o-2"}[i]
				if ev.Err != nil || ev.Table != "public.outbox" || string(ev.Key) != wantKey || string(ev.Value) != `{"n":1}` ||
					ev.Topic != "outbox.event.order" || string(ev.ID) != eventUUID {
					t.Errorf("event %d: %s; want table public.outbox, key %s, the partition's columns mapped by name", i, fmtEvent(ev), wantKey)
				}
			}
			var warned []string
			for _, e := range logs.All() {
				warned = append(warned, e.Message)
			}
			got := strings.Join(warned, "\n")
			switch {
			case tt.wantLog == "" && len(warned) > 0:
				t.Errorf("unexpected warnings: %s", got)
			case tt.wantLog != "" && (len(warned) != 1 || !strings.Contains(got, tt.wantLog)):
				t.Errorf("warnings %q, want one saying %q", got, tt.wantLog)
			}
		})
	}
}

func TestDecodeUnresolvedRelationIsAnError(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
	}{
		{"insert", leafRow("o-1")},
		{"update", msgUpdate(leafRelID, text(`{}`), text("o-1"), text("T"), text("order"), text(eventUUID))},
		{"delete", msgDelete(leafRelID, text(eventUUID))},
		{"truncate", msgTruncate(0, leafRelID)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{ResolvePartitionRoots: true})
			_, err := feed(d, msgBegin(commitLSN, commitTime, xid), leafRelation(), tt.msg)
			if err == nil || !strings.Contains(err.Error(), "before Resolve") {
				t.Fatalf("err = %v, want a change before Resolve refused", err)
			}
			if d.Stats.OtherTables != 0 || d.Stats.Ignored != 0 {
				t.Errorf("the change was counted: %+v", d.Stats)
			}
		})
	}
}

func TestDecodeResolveFollowsRelationMessages(t *testing.T) {
	d := newDecoder(t, Config{ResolvePartitionRoots: true})
	if err := d.Resolve(leafRelID, "public.outbox", true); err == nil {
		t.Errorf("Resolve of a relation never seen: no error")
	}
	// Two Relation messages of one relation before Resolve: one wait.
	mustFeed(t, d, msgBegin(commitLSN, commitTime, xid), leafRelation(), msgRelation(otherRelID, "public", "orders", col{name: "id", oid: pgInt8}), leafRelation())
	var order []uint32
	for oid, _, ok := d.Unresolved(); ok; oid, _, ok = d.Unresolved() {
		order = append(order, oid)
		if err := d.Resolve(oid, "", true); err != nil {
			t.Fatal(err)
		}
	}
	if len(order) != 2 || order[0] != otherRelID || order[1] != leafRelID {
		t.Errorf("resolved %v, want [%d %d]", order, otherRelID, leafRelID)
	}
	// N.B. a new Relation message is resolved again: the table may have
	// been attached to the outbox since.
	mustFeed(t, d, leafRow("o-1"), leafRelation())
	if oid, _, ok := d.Unresolved(); !ok || oid != leafRelID {
		t.Fatalf("a new Relation message of a resolved relation does not wait to be resolved again")
	}
	if err := d.Resolve(leafRelID, "public.outbox", true); err != nil {
		t.Fatal(err)
	}
	txs := mustFeed(t, d, leafRow("o-2"), msgCommit(commitLSN, endLSN, commitTime))
	if len(txs) != 1 || len(txs[0].Events) != 1 || string(txs[0].Events[0].Key) != "o-2" || d.Stats.OtherTables != 1 {
		t.Errorf("want the row before the attach counted as another table's, the one after as an event; got %d parts, stats %+v", len(txs), d.Stats)
	}
}

func TestDecodeWithoutResolvePartitionRootsCountsOtherTables(t *testing.T) {
	d := newDecoder(t, Config{})
	tx := oneTx(t, d, leafRelation(), leafRow("o-1"))
	if _, _, ok := d.Unresolved(); ok || len(tx.Events) != 0 || d.Stats.OtherTables != 1 {
		t.Errorf("Unresolved ok %v, %d events, stats %+v; want false, 0 and one other-table row", ok, len(tx.Events), d.Stats)
	}
}
