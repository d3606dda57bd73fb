package pgcatalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// encoding is the "database encoding" step: whether what PostgreSQL sends
// from this database reaches walrelay as UTF-8.
func (p *prep) encoding(ctx context.Context) (string, error) {
	return readEncoding(ctx, p.conn, p.cfg.Messages)
}

// readEncoding reads the database's server_encoding on conn and checks it
// (checkEncoding).
func readEncoding(ctx context.Context, conn *pgx.Conn, messages bool) (string, error) {
	var enc string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_encoding')`).Scan(&enc); err != nil {
		return "", fmt.Errorf("read server_encoding: %w", err)
	}
	return checkEncoding(enc, messages)
}

// checkEncoding refuses a database whose text walrelay cannot relay as
// UTF-8: SQL_ASCII always, any other than UTF8 for the message source.
//
// N.B. every connection of walrelay asks for client_encoding UTF8
// (replication.ConnectSQL), so PostgreSQL converts a row's values from a
// LATIN1, WIN1252 or EUC_JP database to UTF-8. Two things escape that:
// SQL_ASCII, where PostgreSQL checks and converts nothing, so a value's
// bytes may be in any encoding; and a logical message's content, which
// pgoutput sends as stored (pq_sendbytes, unlike a row's pq_sendcountedtext),
// in the database's encoding.
func checkEncoding(enc string, messages bool) (string, error) {
	switch {
	case enc == "SQL_ASCII":
		return "", setupErrorf("database encoding SQL_ASCII: PostgreSQL neither checks nor converts the text of a SQL_ASCII database, so its bytes may be in any encoding and walrelay cannot relay them as UTF-8: move the outbox to a database created with ENCODING 'UTF8' (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0; see docs/operate.md, Database encodings)")
	case messages && enc != "UTF8":
		return "", setupErrorf("database encoding %s: --source messages needs a UTF8 database: PostgreSQL sends a pg_logical_emit_message content as stored, in the database's encoding, never converted, and walrelay relays UTF-8: emit the messages in a database created with ENCODING 'UTF8' (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0), or write the events to an outbox table and use --source tables, whose rows PostgreSQL converts to UTF-8", enc)
	case enc == "UTF8":
		return "UTF8", nil
	}
	return fmt.Sprintf("%s: PostgreSQL converts each row to UTF-8 for walrelay (client_encoding UTF8)", enc), nil
}
