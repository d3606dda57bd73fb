package recovery

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/kafkastate"
)

// Account is what a recovery did, for the operator: Lines prints it.
type Account struct {
	Kind Kind
	Slot string
	// Nothing, when set, says why there was nothing to do.
	Nothing string
	// ConsistentPoint is the new slot's: streaming starts there.
	ConsistentPoint pglogrepl.LSN
	// Column selected the rows, Since says which, Order orders them.
	Column, Since, Order string
	Tables               []TableAccount
	// NotRecovered lists what the recovery could not cover.
	NotRecovered []string
	// Marker is the slot's marker as the recovery left it.
	Marker kafkastate.Marker
	// Done: every row read was acknowledged and the marker written.
	Done bool
}

// TableAccount is one outbox table's part.
type TableAccount struct {
	Table string
	// Read rows; Published records (with header walrelay.recovered);
	// Poison rows handled as --on-poison says (dead-lettered or parked).
	Read, Published, Poison int
	// First and Last are the ordering times of the rows read (zero: NULL).
	First, Last time.Time
	// Deletes this server counted on the table since DeletesSince (zero:
	// since it started).
	Deletes      int64
	DeletesSince time.Time

	first, last time.Time
}

// Lines is the account, one line each.
func (a Account) Lines() []string {
	if a.Nothing != "" {
		return []string{fmt.Sprintf("%s of slot %s: nothing to do: %s", a.Kind, a.Slot, a.Nothing)}
	}
	if a.ConsistentPoint == 0 {
		return nil // stopped before it created the slot: the error says why
	}
	l := []string{
		fmt.Sprintf("%s of slot %s: new slot created at consistent point %s; rows committed before it were read from the table, rows after it come from the slot", a.Kind, a.Slot, a.ConsistentPoint),
		fmt.Sprintf("rows chosen: %s; ordered per aggregate by %s", a.Since, a.Order),
	}
	for _, t := range a.Tables {
		span := "no rows"
		if t.Read > 0 {
			span = fmt.Sprintf("%s .. %s", stamp(t.First), stamp(t.Last))
		}
		l = append(l, fmt.Sprintf("table %s: rows read %d, records published %d (header %s: %s), poison %d, time range %s", t.Table, t.Read, t.Published, Header, a.Kind, t.Poison, span))
		if t.Deletes > 0 {
			since := "this server started"
			if !t.DeletesSince.IsZero() {
				since = "its statistics were reset at " + stamp(t.DeletesSince)
			}
			l = append(l, fmt.Sprintf("NOT RECOVERED: table %s: %d row(s) were deleted since %s, and deletes on a failed primary are not counted at all: recovery reads rows, so an event whose row was deleted (a delete in the same transaction as the insert, or a cleanup of rows not yet relayed) cannot be recovered and how many of them fell after the slot's last confirmed position cannot be known; keep outbox rows longer than the recovery window (delete by age, e.g. pg_partman retention, never in the inserting transaction)", t.Table, t.Deletes, since))
		}
	}
	for _, n := range a.NotRecovered {
		l = append(l, "NOT RECOVERED: "+n)
	}
	if !a.Done {
		return append(l, "NOT FINISHED: the recovery stopped before Kafka acknowledged every row it read: run walrelay recover again (it drops the slot and starts over; nothing streams from the slot until then)")
	}
	return append(l, fmt.Sprintf("every record above is acknowledged by Kafka; consumers may see duplicates (dedupe by id); walrelay run streams from %s", a.ConsistentPoint))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "NULL"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
