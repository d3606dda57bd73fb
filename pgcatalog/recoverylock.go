package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/replication"
)

// A recovery of a slot (package recovery) holds a session-level advisory
// lock of the slot's database from before it records itself on the state
// topic until it has recorded that it finished. PostgreSQL releases it
// when the session ends, however the recovery ends: whether the lock is
// held says whether a recovery the state topic calls unfinished still
// runs (wait for it) or died (recover again).
//
// The lock's two keys: recoveryLockClass, and a hash of the slot's name
// (two slots whose names collide wait for each other's recoveries, no
// more).
const recoveryLockClass int32 = 0x77616c72 // "walr"

func recoveryLockKey(slot string) int32 {
	h := fnv.New32a()
	h.Write([]byte(slot))
	return int32(h.Sum32())
}

// LockRecovery takes slot's recovery lock for c's session (until Close):
// false when another session holds it.
func (c *CommandConn) LockRecovery(ctx context.Context, slot string) (bool, error) {
	var ok bool
	if err := c.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, recoveryLockClass, recoveryLockKey(slot)).Scan(&ok); err != nil {
		return false, fmt.Errorf("take the recovery lock of slot %q: %w", slot, err)
	}
	return ok, nil
}

// HoldsRecoveryLock fails unless c's session still holds slot's recovery
// lock: a recovery checks it before it records that it finished.
func (c *CommandConn) HoldsRecoveryLock(ctx context.Context, slot string) error {
	pid, held, err := recoveryHolder(ctx, c.conn, slot)
	if err != nil {
		return err
	}
	if !held || pid != c.conn.PgConn().PID() {
		return fmt.Errorf("the recovery of slot %q no longer holds its lock (its PostgreSQL session was ended): another recovery may have begun, this one does not record itself finished", slot)
	}
	return nil
}

// recoveryHolder returns the pid of the session that holds slot's
// recovery lock in conn's database, if one does.
func recoveryHolder(ctx context.Context, conn *pgx.Conn, slot string) (pid uint32, held bool, err error) {
	// N.B. a lock on two int4 keys is listed with classid and objid the
	// keys (as oids) and objsubid 2.
	err = conn.QueryRow(ctx, `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = $1::bigint::oid AND objid = $2::bigint::oid
		LIMIT 1`, int64(uint32(recoveryLockClass)), int64(uint32(recoveryLockKey(slot)))).Scan(&pid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("look up the recovery lock of slot %q: %w", slot, err)
	}
	return pid, true, nil
}

// RecoveryInProgress returns an ErrSlotRecovering error while a recovery
// of slot holds its lock in conn's database (another session's), else nil.
//
// N.B. the stream asks it again once it holds the slot: a relay that read
// the slot before a recovery dropped it and created it again (the same
// name) would otherwise stream the recovery's slot from START_REPLICATION
// on while the recovery still publishes older rows.
func RecoveryInProgress(ctx context.Context, conn *pgx.Conn, slot string) error {
	pid, held, err := recoveryHolder(ctx, conn, slot)
	if err != nil {
		return err
	}
	if held {
		return fmt.Errorf("%w: slot %q is being recovered from the outbox table by another walrelay (its PostgreSQL session, pid %d, holds the recovery's lock): waiting until it finishes",
			replication.ErrSlotRecovering, slot, pid)
	}
	return nil
}

// RecoveryCheck is RecoveryInProgress of slot, for
// replication.Stream.CheckWhenHeld.
func RecoveryCheck(slot string) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error { return RecoveryInProgress(ctx, conn, slot) }
}

// waitForRecovery turns History's err for the slot (nil: none) into
// ErrSlotRecovering while a recovery of the slot holds its lock; else it
// returns err as the history's.
func (p *prep) waitForRecovery(ctx context.Context, err error) error {
	if err != nil && !errors.Is(err, replication.ErrRecoveryUnfinished) {
		return fmt.Errorf("read slot history: %w", err)
	}
	if lerr := RecoveryInProgress(ctx, p.conn, p.cfg.Slot); lerr != nil {
		return lerr
	}
	if err != nil {
		return fmt.Errorf("read slot history: %w", err)
	}
	return nil
}
