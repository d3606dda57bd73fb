package pipeline

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// checkpointSource names the slot for the exactly-once checkpoint key: the
// slot, and the server's system identifier and database as IDENTIFY_SYSTEM
// reports them on a replication connection (what the role streams with
// needs no other privilege); and the server's timeline with its history
// (TIMELINE_HISTORY), which say what of a checkpoint's WAL the server has.
func checkpointSource(ctx context.Context, rc replication.Config) (kafkastate.Source, error) {
	conn, err := replication.ConnectReplication(ctx, rc)
	if err != nil {
		return kafkastate.Source{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	id, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return kafkastate.Source{}, fmt.Errorf("identify system: %w", err)
	}
	// N.B. the history of the timeline IDENTIFY_SYSTEM just named, on the
	// same connection; the stream checks that its own server is on that
	// timeline (Stream.ExpectTimeline), so a failover in between cannot
	// make the checkpoint cover the new timeline's transactions.
	ends, err := pgcatalog.TimelineEnds(ctx, conn, id.Timeline)
	if err != nil {
		return kafkastate.Source{}, err
	}
	return kafkastate.Source{Slot: rc.Slot, Database: id.DBName, SystemID: id.SystemID, Timeline: id.Timeline, TimelineEnds: ends}, nil
}
