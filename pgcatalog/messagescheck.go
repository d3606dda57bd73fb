package pgcatalog

import (
	"context"
	"fmt"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/preflight"
	"github.com/walrelay/walrelay/replication"
)

// MessagesCheck is `walrelay check`'s "message source": what the message
// source relays (messages with prefix; "" is the default, outbox), and
// whether walrelay.emit (walrelay setup) exists and is the one setup
// creates for dc.
func MessagesCheck(ctx context.Context, connString string, dc decode.Config) preflight.Check {
	ch := preflight.Check{Name: "message source"}
	conn, err := replication.ConnectSQL(ctx, connString)
	if err != nil {
		ch.Err = fmt.Errorf("connect to postgresql: %w", err)
		return ch
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var emit bool
	if err := conn.QueryRow(ctx, `SELECT to_regprocedure('walrelay.emit(text,text,text,jsonb)') IS NOT NULL`).Scan(&emit); err != nil {
		ch.Err = fmt.Errorf("look up walrelay.emit: %w", err)
		return ch
	}
	prefix := dc.MessagePrefix
	if prefix == "" {
		prefix = "outbox"
	}
	ch.Note = fmt.Sprintf("pgoutput messages on: each pg_logical_emit_message(true, '%s', json) is an event; non-transactional ones are counted and never published", prefix)
	if emit {
		ch.Note += "; walrelay.emit exists"
		dc.MessagePrefix = prefix
		ch.Err = checkEmit(ctx, conn, dc)
	} else {
		ch.Warnings = append(ch.Warnings, "function walrelay.emit(aggregatetype, aggregateid, type, payload jsonb) does not exist: applications must write the JSON content themselves; `walrelay setup --source messages` creates it (--print shows its SQL)")
	}
	return ch
}
