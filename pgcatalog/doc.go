// Package pgcatalog is PostgreSQL's control plane: everything walrelay asks
// the catalog over ordinary SQL connections (and single commands over a
// replication connection), never streaming WAL.
//
// Input: a replication.Config (the one user-facing PostgreSQL config).
// Output: preflight checks (preflight.Check), the prepared slot
// (Prepare's SlotState: slot and publication checked, created with Create),
// failover, takeover, TLS and column facts, the publication verifier's
// rounds, slot status and partition roots. Invariant: a slot History has a
// record of is never created again (unless RecreateMissingSlot), and
// nothing here moves a slot's position.
package pgcatalog
