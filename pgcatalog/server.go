package pgcatalog

import (
	"context"
	"fmt"

	"github.com/walrelay/walrelay/replication"
	"go.uber.org/zap"
)

// The PostgreSQL versions walrelay supports: those the test bed's matrix
// (make matrix) proves it on, 14 to 18, as server_version_num.
const (
	minServerVersionNum    = 140000
	beyondTestedVersionNum = 190000
	// N.B. pgoutput's messages option is PostgreSQL 14's: the message
	// source is refused before it, whatever the oldest version supported.
	minMessagesVersionNum = 140000
)

func (p *prep) serverVersion(ctx context.Context) (string, error) {
	var num int
	var version string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&num, &version); err != nil {
		return "", fmt.Errorf("read server version: %w", err)
	}
	p.st.ServerVersion = num
	note, untested, err := checkServerVersion(num, version)
	if err == nil && p.cfg.Messages {
		err = checkMessagesVersion(num, version)
	}
	if untested {
		p.log.Warn("PostgreSQL is newer than the versions walrelay was tested on (14 to 18)", zap.String("server_version", version))
	}
	return note, err
}

// checkServerVersion refuses a server older than 14 and reports one newer
// than 18 as untested.
//
// N.B. a newer server is warned about, not refused: pgoutput's protocol
// version 1 is kept by every release, and refusing would stop the relay at
// the first PostgreSQL upgrade. An older one is refused: no test ran there
// (13 is past its end of life).
func checkServerVersion(num int, version string) (note string, untested bool, err error) {
	switch {
	case num < minServerVersionNum:
		return "", false, setupErrorf("PostgreSQL %s is not supported: walrelay needs PostgreSQL 14 or later (tested on 14 to 18): upgrade the server", version)
	case num >= beyondTestedVersionNum:
		return fmt.Sprintf("PostgreSQL %s: newer than the versions walrelay was tested on (14 to 18)", version), true, nil
	}
	return "PostgreSQL " + version, false, nil
}

// checkMessagesVersion refuses the message source before PostgreSQL 14,
// whose pgoutput has no messages option.
func checkMessagesVersion(num int, version string) error {
	if num < minMessagesVersionNum {
		return setupErrorf("PostgreSQL %s cannot stream logical decoding messages: --source messages needs pgoutput's messages option, PostgreSQL 14 or later: upgrade the server, or use --source tables with an outbox table", version)
	}
	return nil
}

func (p *prep) walLevel(ctx context.Context) (string, error) {
	var walLevel string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('wal_level')`).Scan(&walLevel); err != nil {
		return "", fmt.Errorf("read wal_level: %w", err)
	}
	if walLevel != "logical" {
		return "", setupErrorf("wal_level is %q; logical decoding needs wal_level = logical: run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL", walLevel)
	}
	return "", nil
}

func (p *prep) role(ctx context.Context) (string, error) {
	var canReplicate bool
	if err := p.conn.QueryRow(ctx, `SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&canReplicate); err != nil {
		return "", fmt.Errorf("read role: %w", err)
	}
	if !canReplicate {
		return "", setupErrorf("role %q lacks the REPLICATION attribute: run ALTER ROLE %s WITH REPLICATION; as a superuser", p.user, quoteIdent(p.user))
	}
	return "", nil
}

func (p *prep) senderTimeout(ctx context.Context) (string, error) {
	var senderTimeout string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('wal_sender_timeout')`).Scan(&senderTimeout); err != nil {
		return "", fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	var err error
	if p.st.WALSenderTimeout, err = replication.ParseTimeSetting(senderTimeout); err != nil {
		return "", fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	if p.st.WALSenderTimeout > 0 && p.cfg.StatusInterval >= p.st.WALSenderTimeout/2 {
		return "", setupErrorf("status interval %s is not below half of the server's wal_sender_timeout (%s): lower --status-interval", p.cfg.StatusInterval, p.st.WALSenderTimeout)
	}
	return fmt.Sprintf("wal_sender_timeout %s, status interval %s", senderTimeout, p.cfg.StatusInterval), nil
}
