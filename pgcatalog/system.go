package pgcatalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/replication"
)

// identify is the "system identifier" step: it names History's record.
func (p *prep) identify(ctx context.Context) (string, error) {
	sys, err := identify(ctx, p.cfg)
	if err != nil {
		return "", err
	}
	p.st.SystemID, p.st.Database = sys, p.db
	return sys, nil
}

// identify reads the server's system identifier with IDENTIFY_SYSTEM.
//
// N.B. the system identifier is written by initdb and copied by every
// physical standby: a promoted standby has its primary's, so what walrelay
// recorded for a slot on the primary is found again after a failover.
func identify(ctx context.Context, cfg replication.Config) (string, error) {
	conn, err := replication.ConnectReplication(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	sys, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("identify system: %w", err)
	}
	return sys.SystemID, nil
}

// SystemID is the system identifier of the server cfg connects to, for
// History's records: IDENTIFY_SYSTEM, else pg_control_system() (for a role
// without REPLICATION, such as the one that runs walrelay setup).
func SystemID(ctx context.Context, cfg replication.Config) (string, error) {
	sys, err := identify(ctx, cfg)
	if err == nil {
		return sys, nil
	}
	conn, cerr := replication.ConnectSQL(ctx, cfg.ConnString)
	if cerr != nil {
		return "", errors.Join(err, cerr)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if qerr := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&sys); qerr != nil {
		return "", errors.Join(err, qerr)
	}
	return sys, nil
}
