package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/preflight"
	"github.com/walrelay/walrelay/replication"
)

// Takeover describes an existing slot and its publication for `walrelay
// check`: what another relay (Debezium's PostgreSQL connector) left, and
// whether walrelay can stream from it. ok is false when the slot does not
// exist (Preflight's slot check says what happens then), and when it is
// idle and its publication is what walrelay itself creates: the outbox
// tables only, inserts only.
//
// N.B. read-only: the same catalog rows Prepare reads, nothing created.
func Takeover(ctx context.Context, cfg replication.Config) (ch preflight.Check, ok bool) {
	cfg = cfg.WithDefaults()
	ch.Name = "slot takeover"
	conn, err := replication.ConnectSQL(ctx, cfg.ConnString)
	if err != nil {
		ch.Err = fmt.Errorf("connect to postgresql: %w", err)
		return ch, true
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var plugin, slotType, confirmed string
	var activePID *int32
	err = conn.QueryRow(ctx, `SELECT coalesce(plugin, ''), slot_type, coalesce(confirmed_flush_lsn::text, ''), active_pid
		FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).Scan(&plugin, &slotType, &confirmed, &activePID)
	if errors.Is(err, pgx.ErrNoRows) {
		return ch, false
	}
	if err != nil {
		ch.Err = fmt.Errorf("look up slot: %w", err)
		return ch, true
	}
	if slotType != "logical" || plugin != "pgoutput" {
		ch.Err = setupErrorf("slot %q is a %s slot of plugin %q: walrelay takes over pgoutput slots only (Debezium's plugin.name=pgoutput); a decoderbufs or wal2json slot cannot be streamed", cfg.Slot, slotType, plugin)
		return ch, true
	}
	var allTables, ins, upd, del, trunc bool
	var tables []string
	err = conn.QueryRow(ctx, `SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate,
			ARRAY(SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = p.pubname ORDER BY 1)
		FROM pg_publication p WHERE pubname = $1`, cfg.Publication).Scan(&allTables, &ins, &upd, &del, &trunc, &tables)
	if errors.Is(err, pgx.ErrNoRows) {
		ch.Err = setupErrorf("slot %q exists but publication %q does not: give the publication Debezium used (publication.name, default dbz_publication) as --publication", cfg.Slot, cfg.Publication)
		return ch, true
	}
	if err != nil {
		ch.Err = fmt.Errorf("look up publication: %w", err)
		return ch, true
	}
	var ops []string
	for _, o := range []struct {
		on   bool
		name string
	}{{ins, "insert"}, {upd, "update"}, {del, "delete"}, {trunc, "truncate"}} {
		if o.on {
			ops = append(ops, o.name)
		}
	}
	scope := "FOR ALL TABLES (all tables)"
	if !allTables {
		scope = "filtered, tables " + strings.Join(tables, ", ")
	}
	others := 0
	for _, t := range tables {
		if !containsTable(cfg.Tables, t) {
			others++
		}
	}
	if !allTables && others == 0 && len(ops) == 1 && ops[0] == "insert" && activePID == nil {
		// N.B. an idle slot whose publication has the shape walrelay makes
		// (setup, --create): nothing to say beyond the slot and
		// publication checks.
		return ch, false
	}
	holder := "inactive"
	if activePID != nil {
		holder = fmt.Sprintf("active, held by pid %d", *activePID)
		// N.B. not a failure: run waits for the slot (as a second replica
		// does), and starts once the holder lets it go.
		ch.Warnings = append(ch.Warnings, fmt.Sprintf("slot %q is streamed by pid %d (Debezium still running?): stop the connector first (DELETE its connector or pause it); walrelay run waits until the slot is free", cfg.Slot, *activePID))
	}
	ch.Note = fmt.Sprintf("found slot %q (plugin pgoutput, %s, confirmed_flush_lsn %s) and publication %q (%s; publishes %s): walrelay can take it over: it streams from %s, the first events are those after that position (some before it may come again, none is skipped), relays the inserts of %s and ignores and counts the rest (%d other table(s), and %s)",
		cfg.Slot, holder, confirmed, cfg.Publication, scope, strings.Join(ops, ", "), confirmed, strings.Join(cfg.Tables, ", "), others, otherOps(ops))
	return ch, true
}

// otherOps names the published operations walrelay ignores.
func otherOps(ops []string) string {
	var rest []string
	for _, o := range ops {
		if o != "insert" {
			rest = append(rest, o+"s")
		}
	}
	if len(rest) == 0 {
		return "no updates or deletes"
	}
	return strings.Join(rest, ", ") + " of the outbox"
}

func containsTable(tables []string, t string) bool {
	for _, x := range tables {
		if s, n := splitTable(x); s+"."+n == t {
			return true
		}
	}
	return false
}
