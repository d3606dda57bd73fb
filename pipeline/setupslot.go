package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
)

// CheckSetupSlot is `walrelay setup`'s check before it creates the slot:
// a missing slot walrelay streamed from (its marker is on the marker
// topic) is not created again unless RecreateMissingSlot: the error is a
// *pgcatalog.SlotGoneError (pgcatalog.CheckSlotGone). When the markers
// cannot be read it returns a warning saying what that risks, and no error.
func CheckSetupSlot(ctx context.Context, cfg Config, conn *pgcatalog.CommandConn, db string) (warning string, err error) {
	rc := cfg.Replication
	if exists, err := conn.SlotExists(ctx, rc.Slot); err != nil || exists || rc.RecreateMissingSlot {
		return "", nil
	}
	mc := cfg.Marker
	mc.CreateTopic = false
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ms, err := kafkastate.Open(kctx, mc, zap.NewNop())
	if errors.Is(err, kafkastate.ErrSetup) {
		return "", nil // no compacted marker topic: no marker
	}
	if err != nil {
		return fmt.Sprintf("cannot read the slot markers on %s (%v): if walrelay streamed from slot %q before, creating it again skips the events committed since", mc.Topic, err, rc.Slot), nil
	}
	defer ms.Close()
	return "", pgcatalog.CheckSlotGone(ctx, rc, db, ms)
}
