package pgcatalog

import (
	"context"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

// PrepareBeforeSlot runs Prepare's checks up to the slot: the server, the
// role, the outbox tables and the publication, created when cfg.Create
// allows. A recovery creates the slot itself (CreateSnapshotSlot), after
// them.
//
// N.B. the publication must exist before the slot: pgoutput reads it with
// the catalog as of each change, so a row committed before the
// publication was created is never sent, though the slot was there.
func PrepareBeforeSlot(ctx context.Context, cfg replication.Config, log *zap.Logger) error {
	p, err := newPrep(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer p.conn.Close(context.WithoutCancel(ctx))
	for _, step := range p.steps() {
		if step.name == "replication slot" {
			return nil
		}
		if _, err := step.run(ctx); err != nil {
			return err
		}
	}
	return nil
}
