package pipeline

import (
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/kafkastate"
)

// SharedMarkers is a marker store the pipelines of one process share
// (package fleet), and the marker topic as read once before they start:
// one client and one read of the topic for all of them, instead of one
// each at every pipeline's start.
type SharedMarkers struct {
	// Store is the shared store; the relay never closes it.
	Store *kafkastate.Store
	// Snapshot is the topic read just before the pipelines started; nil:
	// none. A relay's first answer about its slot's marker comes from it
	// when it is at most snapshotFresh old, every later one from Kafka (or
	// from what the relay wrote or read since, as before).
	Snapshot *kafkastate.Snapshot
}

// snapshotFresh is how old a snapshot may be when a pipeline's first
// attempt asks it: a start that took longer reads the topic again.
const snapshotFresh = 30 * time.Second

// useShared makes the history use s's store and, once, its snapshot.
func (h *history) useShared(s *SharedMarkers) {
	if s == nil || s.Store == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.store, h.shared, h.snap = s.Store, true, s.Snapshot
}

// fromSnapshot answers LastConfirmed from the snapshot, the first time it
// is asked and only while the snapshot is fresh: used says whether it did.
func (h *history) fromSnapshot(system, database, slot string) (lsn pglogrepl.LSN, at time.Time, found, used bool, err error) {
	h.mu.Lock()
	sn := h.snap
	h.snap = nil
	h.mu.Unlock()
	if sn == nil || time.Since(sn.At) > snapshotFresh {
		return 0, time.Time{}, false, false, nil
	}
	lsn, at, found, err = sn.LastConfirmed(system, database, slot)
	return lsn, at, found, true, err
}
