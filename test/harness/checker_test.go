package harness

import (
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// history is a small crafted history: key a has events a1..a3 committed in
// that order, key b has b1, b2. Each transaction holds one event; commit
// ends are 100, 200, ... in the order a1 b1 a2 b2 a3.
func history() History {
	return History{
		Committed: []Event{
			{ID: "a1", Key: "a", Seq: 1, CommitEnd: 100},
			{ID: "b1", Key: "b", Seq: 1, CommitEnd: 200},
			{ID: "a2", Key: "a", Seq: 2, CommitEnd: 300},
			{ID: "b2", Key: "b", Seq: 2, CommitEnd: 400},
			{ID: "a3", Key: "a", Seq: 3, CommitEnd: 500},
		},
		RolledBack: map[string]bool{"rb": true},
	}
}

// rec is a record of event id with key key at partition 0 (key a) or 1
// (key b) and the given offset.
func rec(id, key string, offset int64) Record {
	p := int32(0)
	if key == "b" {
		p = 1
	}
	return Record{ID: id, Key: key, Topic: "outbox.event.t", Partition: p, Offset: offset}
}

// clean is every event once, in commit order per key.
func clean() []Record {
	return []Record{rec("a1", "a", 0), rec("a2", "a", 1), rec("a3", "a", 2), rec("b1", "b", 0), rec("b2", "b", 1)}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	// A kill after a2 was confirmed: the restart resends a3 (and b2).
	kill := Fault{Kind: "kill-9", ConfirmedBefore: 300, WALAfter: 500}
	cases := []struct {
		name    string
		records []Record
		faults  []Fault
		want    Report // the counts compared
		problem string // a word the first problem must contain
	}{
		{name: "clean", records: clean(), want: Report{MaxCopies: 1}},
		{
			name: "lost",
			// a2 never arrives: a1 a3 keep their order.
			records: []Record{rec("a1", "a", 0), rec("a3", "a", 1), rec("b1", "b", 0), rec("b2", "b", 1)},
			want:    Report{Lost: 1, Gaps: 1, MaxCopies: 1},
			problem: "lost: event a2",
		},
		{
			name:    "phantom rolled back",
			records: append(clean(), rec("rb", "a", 3)),
			want:    Report{Phantom: 1, MaxCopies: 1},
			problem: "was rolled back",
		},
		{
			name:    "phantom never written",
			records: append(clean(), rec("zz", "b", 2)),
			want:    Report{Phantom: 1, MaxCopies: 1},
			problem: "was never committed",
		},
		{
			name:    "phantom without id",
			records: append(clean(), rec("", "b", 2)),
			want:    Report{Phantom: 1, MaxCopies: 1},
			problem: "no id header",
		},
		{
			name: "phantom with another key",
			// b1's id under key a: not the event that was committed.
			records: []Record{rec("a1", "a", 0), rec("b1", "a", 1), rec("a2", "a", 2), rec("a3", "a", 3), rec("b1", "b", 0), rec("b2", "b", 1)},
			want:    Report{Phantom: 1, MaxCopies: 1},
			problem: `has key "a"`,
		},
		{
			name:    "order: first occurrences swapped",
			records: []Record{rec("a1", "a", 0), rec("a3", "a", 1), rec("a2", "a", 2), rec("b1", "b", 0), rec("b2", "b", 1)},
			want:    Report{OrderViolations: 1, Gaps: 1, MaxCopies: 1},
			problem: "seq 2 first appears at offset 2, after seq 3",
		},
		{
			name: "order: key in two partitions",
			records: []Record{rec("a1", "a", 0), rec("a2", "a", 1), rec("a3", "a", 2), rec("b1", "b", 0),
				{ID: "b2", Key: "b", Topic: "outbox.event.t", Partition: 2, Offset: 0}},
			want:    Report{OrderViolations: 1, MaxCopies: 1},
			problem: "no order between partitions",
		},
		{
			name: "order: a key in another topic is another sequence",
			// a3 in a second topic before a1 there: no order between topics.
			records: []Record{{ID: "a3", Key: "a", Topic: "outbox.event.u", Partition: 0, Offset: 0}, rec("a1", "a", 0), rec("a2", "a", 1), rec("b1", "b", 0), rec("b2", "b", 1)},
			want:    Report{MaxCopies: 1},
		},
		{
			name: "duplicates after the confirmed position are explained",
			// The restart resends a3 and b2 (committed after 300, before
			// the fault was over): a1 a2 a3 | a3, b1 b2 | b2.
			records: append(clean(), rec("a3", "a", 3), rec("b2", "b", 2)),
			faults:  []Fault{kill},
			want:    Report{Duplicates: 2, DuplicatedEvents: 2, MaxCopies: 2},
		},
		{
			name: "resent duplicates keep the order of first occurrences",
			// a1 a2 | a2 a3: first occurrences a1 a2 a3.
			records: []Record{rec("a1", "a", 0), rec("a2", "a", 1), rec("a2", "a", 2), rec("a3", "a", 3), rec("b1", "b", 0), rec("b2", "b", 1)},
			faults:  []Fault{{Kind: "kill-9", ConfirmedBefore: 100, WALAfter: 300}},
			want:    Report{Duplicates: 1, DuplicatedEvents: 1, MaxCopies: 2},
		},
		{
			name: "duplicate of an event confirmed before the fault",
			// a2 ends at 300, confirmed before the kill: resending it is a bug.
			records: append(clean(), rec("a2", "a", 3)),
			faults:  []Fault{kill},
			want:    Report{Duplicates: 1, DuplicatedEvents: 1, MaxCopies: 2, UnexplainedDuplicates: 1},
			problem: "duplicate: event a2",
		},
		{
			name: "duplicate committed after the fault was over",
			// a3 ends at 500, after the fault's WAL position 400.
			records: append(clean(), rec("a3", "a", 3)),
			faults:  []Fault{{Kind: "kill-9", ConfirmedBefore: 100, WALAfter: 400}},
			want:    Report{Duplicates: 1, DuplicatedEvents: 1, MaxCopies: 2, UnexplainedDuplicates: 1},
			problem: "only 0 faults struck",
		},
		{
			name:    "duplicate without a fault",
			records: append(clean(), rec("b2", "b", 2)),
			want:    Report{Duplicates: 1, DuplicatedEvents: 1, MaxCopies: 2, UnexplainedDuplicates: 1},
			problem: "duplicate: event b2",
		},
		{
			name: "more copies than faults",
			// a3 three times, one fault.
			records: append(clean(), rec("a3", "a", 3), rec("a3", "a", 4)),
			faults:  []Fault{kill},
			want:    Report{Duplicates: 2, DuplicatedEvents: 1, MaxCopies: 3, UnexplainedDuplicates: 1},
			problem: "has 3 copies, but only 1 faults",
		},
		{
			name:    "two faults explain three copies",
			records: append(clean(), rec("a3", "a", 3), rec("a3", "a", 4)),
			faults:  []Fault{kill, {Kind: "cut", ConfirmedBefore: 400, WALAfter: 600}},
			want:    Report{Duplicates: 2, DuplicatedEvents: 1, MaxCopies: 3},
		},
		{
			name: "every kind at once",
			// a2 lost, a phantom, b's order broken, b1 duplicated without a fault.
			records: []Record{rec("a1", "a", 0), rec("a3", "a", 1), rec("rb", "a", 2), rec("b2", "b", 0), rec("b1", "b", 1), rec("b1", "b", 2)},
			want:    Report{Lost: 1, Phantom: 1, OrderViolations: 1, Gaps: 2, Duplicates: 1, DuplicatedEvents: 1, MaxCopies: 2, UnexplainedDuplicates: 1},
		},
		{
			name: "gap: an event lost, a later one of its key delivered",
			// The gap alone: a2 never comes, a3 is there.
			records: []Record{rec("a1", "a", 0), rec("a3", "a", 1), rec("b1", "b", 0), rec("b2", "b", 1)},
			want:    Report{Lost: 1, Gaps: 1, MaxCopies: 1},
			problem: "lost: event a2",
		},
		{
			name: "gap: an event dead-lettered, its aggregate's later ones delivered",
			// --on-poison=dead-letter: a2 went to the dead-letter topic
			// (not read here) and a3 overtook it. Re-published later (a
			// redrive), a2 comes after a3: the consumer saw a gap.
			records: []Record{rec("a1", "a", 0), rec("a3", "a", 1), rec("b1", "b", 0), rec("b2", "b", 1), rec("a2", "a", 2)},
			want:    Report{OrderViolations: 1, Gaps: 1, MaxCopies: 1},
			problem: "order: key a",
		},
		{
			name: "no gap: a parked aggregate's events redriven in order after the earlier ones",
			// --on-poison=park: a2 and a3 parked, then re-published in
			// order, a3 twice (a redrive run again).
			records: []Record{rec("a1", "a", 0), rec("b1", "b", 0), rec("b2", "b", 1), rec("a2", "a", 1), rec("a3", "a", 2), rec("a3", "a", 3)},
			faults:  []Fault{{Kind: "redrive-kill", ConfirmedBefore: 0, WALAfter: 500}},
			want:    Report{Duplicates: 1, DuplicatedEvents: 1, MaxCopies: 2},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := history()
			h.Records, h.Faults = c.records, c.faults
			got := Check(h)
			want := c.want
			want.Events, want.Records, want.Faults = len(h.Committed), len(c.records), len(c.faults)
			if got.String() != want.String() {
				t.Errorf("Check:\n got %s\nwant %s\nproblems: %q", got, want, got.Problems)
			}
			if ok := want.Lost+want.Phantom+want.OrderViolations+want.Gaps+want.UnexplainedDuplicates == 0; got.OK() != ok {
				t.Errorf("OK() = %v, want %v", got.OK(), ok)
			}
			if c.problem != "" && (len(got.Problems) == 0 || !strings.Contains(got.Problems[0], c.problem)) {
				t.Errorf("problems %q, want the first to mention %q", got.Problems, c.problem)
			}
			if c.problem == "" && got.OK() && len(got.Problems) > 0 {
				t.Errorf("problems %q in a history that passes", got.Problems)
			}
		})
	}
}

func TestEventsNeedACommitPosition(t *testing.T) {
	t.Parallel()
	rows := map[string]OutboxRow{
		"a1": {ID: "a1", AggID: "a", Seq: 1, Xid: 7},
		"a2": {ID: "a2", AggID: "a", Seq: 2, Xid: 8},
	}
	evs, err := Events(rows, map[uint32]pglogrepl.LSN{7: 100, 8: 200})
	if err != nil || len(evs) != 2 {
		t.Fatalf("Events = %v, %v; want two events", evs, err)
	}
	for _, ev := range evs {
		if want := pglogrepl.LSN(ev.Seq * 100); ev.CommitEnd != want || ev.Key != "a" {
			t.Errorf("event %+v, want key a and commit end %s", ev, want)
		}
	}
	if _, err := Events(rows, map[uint32]pglogrepl.LSN{7: 100}); err == nil {
		t.Error("Events accepted a row whose transaction the witness never saw")
	}
}
