package pgcatalog

import (
	"context"
	"fmt"
)

// twoPhaseVersionNum is the first PostgreSQL with two-phase logical
// decoding slots (pg_replication_slots.two_phase).
const twoPhaseVersionNum = 140000

// refuseTwoPhase refuses a slot created with two_phase = true: PostgreSQL
// then decodes a prepared transaction at its PREPARE, sending pgoutput's
// prepare messages whatever the stream asks for, and walrelay, which relays
// committed transactions only, cannot decode them. Streaming it would fail
// at the first PREPARE TRANSACTION and again after every restart.
//
// N.B. refused at start, before the first PREPARE: a slot that is fine
// today stops the relay the day an application prepares a transaction.
func (p *prep) refuseTwoPhase(ctx context.Context) error {
	if p.st.ServerVersion < twoPhaseVersionNum {
		return nil
	}
	var twoPhase bool
	if err := p.conn.QueryRow(ctx, `SELECT two_phase FROM pg_replication_slots WHERE slot_name = $1`, p.cfg.Slot).Scan(&twoPhase); err != nil {
		return fmt.Errorf("read the slot's two_phase: %w", err)
	}
	if !twoPhase {
		return nil
	}
	return setupErrorf("replication slot %q was created with two_phase = true: PostgreSQL sends its prepared transactions at PREPARE, as messages walrelay cannot decode; "+
		"choose another --slot, or drop it and let walrelay create it without two_phase (SELECT pg_drop_replication_slot('%s'); then start walrelay, which creates it (--create, the default); "+
		"what was committed between its confirmed_flush_lsn and the new slot's creation is then not relayed)", p.cfg.Slot, p.cfg.Slot)
}
