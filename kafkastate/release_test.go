package kafkastate

import (
	"encoding/json"
	"os"
	"testing"
)

// TestReadsPreviousReleaseRecords: the records the previous release
// (8e87de4) wrote on its checkpoint topic, captured from a real run
// (--exactly-once, three transactions, a graceful stop) and stored as they
// were in testdata/release-8e87de4.json, decode to what that release meant,
// and this tree writes the same values as the same bytes under the same
// keys: a rolling upgrade finds its slot markers and checkpoints.
// (test/e2e's TestRollingUpgrade runs the upgrade itself.)
func TestReadsPreviousReleaseRecords(t *testing.T) {
	b, err := os.ReadFile("testdata/release-8e87de4.json")
	if err != nil {
		t.Fatal(err)
	}
	var recs []struct {
		Key, Value string
	}
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d captured records, want 4", len(recs))
	}
	// What the captured run recorded, read off the records by hand.
	const system, db, slot = "7715978011819987641", "upg", "upgrade_slot2"
	markers := []struct{ confirmed, updated string }{{"0/19695B8", "2026-12-06T00:18:16.640268462Z"}, {"0/19695F0", "2026-12-06T00:18:26.760246063Z"}}
	checkpoints := []struct{ end, commit string }{{"0/19697D0", "0/19697A0"}, {"0/19698C0", "0/1969890"}}
	var nm, nc int
	for i, r := range recs {
		switch r.Key {
		case Key(system, db, slot):
			var m Marker
			if err := json.Unmarshal([]byte(r.Value), &m); err != nil {
				t.Fatalf("record %d: marker: %v", i, err)
			}
			want := markers[nm]
			nm++
			if m.Slot != slot || m.Database != db || m.SystemIdentifier != system || m.ConfirmedLSN != want.confirmed || m.Version != "8e87de4" ||
				m.UpdatedAt.Format("2006-01-02T15:04:05.999999999Z07:00") != want.updated {
				t.Errorf("record %d: marker %+v, want slot %s database %s system %s confirmed %s updated %s version 8e87de4", i, m, slot, db, system, want.confirmed, want.updated)
			}
			if lsn, err := m.LSN(); err != nil || lsn.String() != want.confirmed {
				t.Errorf("record %d: marker LSN %s, %v; want %s", i, lsn, err, want.confirmed)
			}
			if v, _ := json.Marshal(m); string(v) != r.Value {
				t.Errorf("record %d: this tree writes the marker as\n%s\nthe previous release wrote\n%s", i, v, r.Value)
			}
		case CheckpointKey(Source{Slot: slot, Database: db, SystemID: system}):
			var c Checkpoint
			if err := json.Unmarshal([]byte(r.Value), &c); err != nil {
				t.Fatalf("record %d: checkpoint: %v", i, err)
			}
			want := checkpoints[nc]
			nc++
			if c.Slot != slot || c.Database != db || c.SystemIdentifier != system || c.EndLSN != want.end || c.CommitLSN != want.commit ||
				c.Timeline != 1 || c.TransactionalID != "walrelay-"+slot {
				t.Errorf("record %d: checkpoint %+v, want end %s commit %s timeline 1", i, c, want.end, want.commit)
			}
			rec := CheckpointRecord("walrelay.cp2", Source{Slot: slot, Database: db, SystemID: system, Timeline: 1}, c)
			if string(rec.Key) != r.Key || string(rec.Value) != r.Value {
				t.Errorf("record %d: this tree writes the checkpoint as %s = \n%s\nthe previous release wrote %s =\n%s", i, rec.Key, rec.Value, r.Key, r.Value)
			}
		default:
			t.Errorf("record %d: key %q is neither this slot's marker nor its checkpoint", i, r.Key)
		}
	}
	if nm != 2 || nc != 2 {
		t.Errorf("%d markers and %d checkpoints read, want 2 and 2", nm, nc)
	}
}
