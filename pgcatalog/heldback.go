package pgcatalog

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// StandbyWait is what a server's synchronized_standby_slots (PostgreSQL
// 17+) makes its logical walsenders of failover slots wait for: they send
// nothing past a WAL position until every physical slot it names (or, with
// ANY n, n of them) has confirmed it (slot.c, StandbySlotsHaveCaughtup).
// A named slot that is missing, not physical, invalidated or held by no
// standby holds the stream back for as long as it stays so.
type StandbyWait struct {
	// Setting is synchronized_standby_slots ("" when unset, or before 17).
	Setting string
	// Stuck says, for each named slot that cannot confirm, why ("slot
	// \"sb\" does not exist"); Need is how many of the named slots must
	// confirm, Named how many there are.
	Stuck       []string
	Need, Named int
	// WAL is the server's pg_current_wal_lsn().
	WAL pglogrepl.LSN
}

// Holds says whether the setting holds the stream back: fewer of its
// slots can confirm than it needs.
func (w StandbyWait) Holds() bool { return w.Need > 0 && w.Named-len(w.Stuck) < w.Need }

// StandbyWait reads the server's synchronized_standby_slots and the slots
// it names, over the reader's connection.
func (r *SlotReader) StandbyWait(ctx context.Context) (StandbyWait, error) {
	var w StandbyWait
	if r.conn == nil {
		if _, err := r.Read(ctx); err != nil {
			return w, err
		}
	}
	var setting *string
	if err := r.conn.QueryRow(ctx, `SELECT current_setting('synchronized_standby_slots', true), pg_current_wal_lsn()::text`).Scan(&setting, &w.WAL); err != nil {
		r.Close()
		return w, fmt.Errorf("read synchronized_standby_slots: %w", err)
	}
	w.Setting = strings.TrimSpace(deref(setting))
	names, need := ParseStandbySlots(w.Setting)
	w.Need, w.Named = need, len(names)
	if len(names) == 0 {
		return w, nil
	}
	rows, err := r.conn.Query(ctx, `SELECT n, s.slot_type, coalesce(s.active, false), s.invalidation_reason
		FROM unnest($1::text[]) n LEFT JOIN pg_replication_slots s ON s.slot_name = n`, names)
	if err != nil {
		r.Close()
		return w, fmt.Errorf("read the slots synchronized_standby_slots names: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var typ, invalid *string
		var active bool
		if err := rows.Scan(&name, &typ, &active, &invalid); err != nil {
			return w, fmt.Errorf("read the slots synchronized_standby_slots names: %w", err)
		}
		switch {
		case typ == nil:
			w.Stuck = append(w.Stuck, fmt.Sprintf("slot %q does not exist", name))
		case *typ != "physical":
			w.Stuck = append(w.Stuck, fmt.Sprintf("slot %q is a %s slot, not a standby's", name, *typ))
		case invalid != nil:
			w.Stuck = append(w.Stuck, fmt.Sprintf("slot %q is invalidated (%s)", name, *invalid))
		case !active:
			w.Stuck = append(w.Stuck, fmt.Sprintf("no standby streams from slot %q (inactive)", name))
		}
	}
	if err := rows.Err(); err != nil {
		r.Close()
		return w, fmt.Errorf("read the slots synchronized_standby_slots names: %w", err)
	}
	return w, nil
}

// ParseStandbySlots reads a synchronized_standby_slots value: the slot
// names (SplitIdentifierString's rules: comma-separated, unquoted names
// folded to lower case, double quotes keep them) and how many of them must
// confirm (all of them; n for "ANY n (a, b)" or "FIRST n (a, b)", which
// later servers take).
func ParseStandbySlots(v string) (names []string, need int) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, 0
	}
	need = -1
	if kw, rest, ok := strings.Cut(v, " "); ok && (strings.EqualFold(kw, "ANY") || strings.EqualFold(kw, "FIRST")) {
		num, list, ok := strings.Cut(strings.TrimSpace(rest), "(")
		if n, err := strconv.Atoi(strings.TrimSpace(num)); ok && err == nil {
			need, v = n, strings.TrimSuffix(strings.TrimSpace(list), ")")
		}
	}
	names = splitIdentifiers(v)
	if need < 0 || need > len(names) {
		need = len(names)
	}
	return names, need
}

// splitIdentifiers splits a comma-separated list of identifiers.
func splitIdentifiers(s string) []string {
	var out []string
	var b strings.Builder
	quoted, inQuotes := false, false
	flush := func() {
		name := b.String()
		if !quoted {
			name = strings.ToLower(strings.TrimSpace(name))
		}
		if name != "" {
			out = append(out, name)
		}
		b.Reset()
		quoted = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuotes && c == '"' && i+1 < len(s) && s[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '"':
			inQuotes = !inQuotes
			quoted = true
		case !inQuotes && c == ',':
			flush()
		case !inQuotes && (c == ' ' || c == '\t' || c == '\n'):
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return out
}
