package pgcatalog

import "testing"

func TestStandbySlotReady(t *testing.T) {
	ok := StandbySlot{Exists: true, Synced: true, InRecovery: true}
	for _, c := range []struct {
		name string
		ss   StandbySlot
		want bool
	}{
		{"synchronized", ok, true},
		{"promoted", StandbySlot{Exists: true, Synced: true}, false},
		{"temporary", StandbySlot{Exists: true, Synced: true, InRecovery: true, Temporary: true}, false},
		{"invalidated", StandbySlot{Exists: true, Synced: true, InRecovery: true, Invalidation: "wal_removed"}, false},
		{"missing", StandbySlot{InRecovery: true}, false},
	} {
		if got := c.ss.Ready(); got != c.want {
			t.Errorf("%s: Ready() = %v, want %v", c.name, got, c.want)
		}
	}
}
