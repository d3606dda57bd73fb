package kafkastate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pglogrepl"
)

// Snapshot is every slot's last marker on the topic, read once: what the
// pipelines of one process starting at once ask the topic for, in one read
// instead of one read each (package fleet).
type Snapshot struct {
	// At is when the read began: a marker written after At may be missing.
	At      time.Time
	markers map[string][]byte // by Key; tombstones removed
}

// ReadAll reads the topic to its end offsets, as Read does, and keeps
// every key's last marker.
func (s *Store) ReadAll(ctx context.Context) (*Snapshot, error) {
	sn := &Snapshot{At: time.Now()}
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	if err := s.catchUp(ctx); err != nil {
		return nil, err
	}
	sn.markers = maps.Clone(s.idx.markers)
	return sn, nil
}

// Len is how many markers the snapshot holds.
func (sn *Snapshot) Len() int { return len(sn.markers) }

// LastConfirmed is Store.LastConfirmed's answer as of sn.At.
func (sn *Snapshot) LastConfirmed(system, database, slot string) (pglogrepl.LSN, time.Time, bool, error) {
	key := Key(system, database, slot)
	v, ok := sn.markers[key]
	if !ok {
		return 0, time.Time{}, false, nil
	}
	var m Marker
	if err := json.Unmarshal(v, &m); err != nil {
		return 0, time.Time{}, false, fmt.Errorf("decode marker %s: %w", key, err)
	}
	return m.lastConfirmed(system, database, slot)
}
