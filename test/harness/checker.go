package harness

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Event is a committed outbox row as the checker sees it.
type Event struct {
	ID  string
	Key string // the aggregate id: the record key
	// Seq is the event's place in its key's commit order (the workload's
	// per-aggregate sequence, handed out under a row lock, so a later
	// commit always has the higher number). 0: the event has none (its
	// payload has no seq), and its order is not checked.
	Seq int64
	// CommitEnd is the end of its transaction's commit record: the position
	// walrelay confirms once the transaction is acknowledged.
	CommitEnd pglogrepl.LSN
}

// Record is a record read back from Kafka.
type Record struct {
	ID        string // the "id" header; "" when missing
	Key       string
	Topic     string
	Partition int32
	Offset    int64
}

// Fault is one injected fault and the positions around it. A fault may make
// walrelay send again what it had sent but not confirmed: events committed
// after ConfirmedBefore and no later than WALAfter.
type Fault struct {
	Kind string
	// ConfirmedBefore is the slot's confirmed_flush_lsn read before the fault
	// was injected (or the position PostgreSQL resumed the slot from, if
	// lower).
	ConfirmedBefore pglogrepl.LSN
	// WALAfter is pg_current_wal_lsn() read once the fault was over: no
	// transaction the faulted session could have sent ends later.
	WALAfter pglogrepl.LSN
}

// History is what the checker judges.
type History struct {
	Committed []Event
	Records   []Record
	Faults    []Fault
	// RolledBack names ids that were rolled back, to say so of phantoms.
	RolledBack map[string]bool
}

// Report is the checker's verdict.
type Report struct {
	Events  int // committed events
	Records int // records read back
	Faults  int

	Lost            int      // committed, never in Kafka
	LostIDs         []string // their ids
	Phantom         int      // in Kafka, never committed as such (rolled back, unknown id, no id, wrong key)
	OrderViolations int      // per key, a first occurrence after one later in commit order
	// Gaps counts keys where an event first appears while an event
	// committed before it (its key's, in the same topic) has not: a
	// consumer saw a gap followed by a later event (a missing
	// OrderCreated before its OrderShipped), whether the missing one comes
	// later or never.
	Gaps int

	Duplicates       int // records beyond the first of their event
	DuplicatedEvents int // events with more than one record
	MaxCopies        int // most records of one event (1 when there is no duplicate)
	// UnexplainedDuplicates counts duplicate records that no fault accounts
	// for: their event ended at or before the position confirmed before
	// every fault that could have sent it again, or it has more copies than
	// such faults.
	UnexplainedDuplicates int

	// Problems describes the first violations found.
	Problems []string
}

// OK reports whether the invariants hold: nothing lost, no phantom, commit
// order per key, and duplicates only after a position confirmed before a
// fault.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Phantom == 0 && r.OrderViolations == 0 && r.Gaps == 0 && r.UnexplainedDuplicates == 0
}

func (r Report) String() string {
	return fmt.Sprintf("events=%d records=%d faults=%d lost=%d phantom=%d order_violations=%d gaps=%d duplicates=%d duplicated_events=%d max_copies=%d unexplained_duplicates=%d",
		r.Events, r.Records, r.Faults, r.Lost, r.Phantom, r.OrderViolations, r.Gaps, r.Duplicates, r.DuplicatedEvents, r.MaxCopies, r.UnexplainedDuplicates)
}

const maxProblems = 20

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Check compares what Kafka holds with what was committed.
func Check(h History) Report {
	rep := Report{Events: len(h.Committed), Records: len(h.Records), Faults: len(h.Faults), MaxCopies: 1}
	events := make(map[string]*Event, len(h.Committed))
	for i := range h.Committed {
		events[h.Committed[i].ID] = &h.Committed[i]
	}

	copies := make(map[string]int, len(h.Committed))
	// N.B. order is per key within a topic: a key's records in another
	// topic (another aggregate type) are another sequence.
	type topicKey = gapKeyOf
	byKey := map[topicKey][]Record{}
	for _, r := range h.Records {
		ev, ok := events[r.ID]
		switch {
		case r.ID == "":
			rep.Phantom++
			rep.problem("phantom: record at %s[%d]@%d has no id header", r.Topic, r.Partition, r.Offset)
			continue
		case !ok:
			rep.Phantom++
			what := "was never committed"
			if h.RolledBack[r.ID] {
				what = "was rolled back"
			}
			rep.problem("phantom: record %s at %s[%d]@%d %s", r.ID, r.Topic, r.Partition, r.Offset, what)
			continue
		case r.Key != ev.Key:
			rep.Phantom++
			rep.problem("phantom: record %s at %s[%d]@%d has key %q, the committed row %q", r.ID, r.Topic, r.Partition, r.Offset, r.Key, ev.Key)
			continue
		}
		copies[r.ID]++
		tk := topicKey{r.Topic, r.Key}
		byKey[tk] = append(byKey[tk], r)
	}

	for i := range h.Committed {
		ev := &h.Committed[i]
		n := copies[ev.ID]
		if n == 0 {
			rep.Lost++
			rep.LostIDs = append(rep.LostIDs, ev.ID)
			rep.problem("lost: event %s (key %s, seq %d, commit end %s) is not in Kafka", ev.ID, ev.Key, ev.Seq, ev.CommitEnd)
			continue
		}
		if n == 1 {
			continue
		}
		rep.Duplicates += n - 1
		rep.DuplicatedEvents++
		rep.MaxCopies = max(rep.MaxCopies, n)
		// N.B. a fault can make walrelay resend an event only if it was past
		// the confirmed position when the fault struck and already committed
		// (sent) before the fault was over; each such fault resends it at most
		// once.
		covering := 0
		for _, f := range h.Faults {
			if ev.CommitEnd > f.ConfirmedBefore && ev.CommitEnd <= f.WALAfter {
				covering++
			}
		}
		if extra := n - 1 - covering; extra > 0 {
			rep.UnexplainedDuplicates += extra
			rep.problem("duplicate: event %s (key %s, commit end %s) has %d copies, but only %d faults struck while it was unconfirmed",
				ev.ID, ev.Key, ev.CommitEnd, n, covering)
		}
	}

	// Per key and topic, the first occurrences must follow commit order.
	// Records of one key share a partition of the topic, where offsets give
	// the order.
	keys := make([]topicKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b topicKey) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.key, b.key)) })
	for _, tk := range keys {
		rs, key := byKey[tk], tk.key
		slices.SortFunc(rs, func(a, b Record) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
		})
		if first, last := rs[0], rs[len(rs)-1]; first.Topic != last.Topic || first.Partition != last.Partition {
			rep.OrderViolations++
			rep.problem("order: key %s is in %s[%d] and %s[%d]: no order between partitions", key, first.Topic, first.Partition, last.Topic, last.Partition)
			continue
		}
		seen := make(map[string]bool, len(rs))
		var high *Event
		for _, r := range rs {
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			ev := events[r.ID]
			if ev.Seq == 0 {
				continue
			}
			if high != nil && ev.Seq < high.Seq {
				rep.OrderViolations++
				rep.problem("order: key %s: event seq %d first appears at offset %d, after seq %d", key, ev.Seq, r.Offset, high.Seq)
				continue
			}
			high = ev
		}
	}
	rep.Gaps = gaps(h.Committed, byKey)
	for _, p := range gapProblems(h.Committed, byKey) {
		rep.problem("%s", p)
	}
	return rep
}

// Summary renders the report and its problems on several lines.
func (r Report) Summary() string {
	var b strings.Builder
	b.WriteString(r.String())
	for _, p := range r.Problems {
		b.WriteString("\n  ")
		b.WriteString(p)
	}
	return b.String()
}

// FromKafka converts consumed records.
func FromKafka(recs []*kgo.Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		id, _ := Header(r, "id")
		out[i] = Record{ID: id, Key: string(r.Key), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	}
	return out
}

// Events joins the committed rows with their transactions' commit ends
// (from a Witness), failing when a row's transaction has none.
func Events(rows map[string]OutboxRow, commitEnds map[uint32]pglogrepl.LSN) ([]Event, error) {
	out := make([]Event, 0, len(rows))
	var missing int
	for _, r := range rows {
		end, ok := commitEnds[r.Xid]
		if !ok {
			missing++
			continue
		}
		out = append(out, Event{ID: r.ID, Key: r.AggID, Seq: r.Seq, CommitEnd: end})
	}
	if missing > 0 {
		return nil, fmt.Errorf("%d committed rows have no commit position in the witness", missing)
	}
	return out, nil
}

// EventsOf is Events for a history without faults: no commit positions.
func EventsOf(rows map[string]OutboxRow) []Event {
	out := make([]Event, 0, len(rows))
	for _, r := range rows {
		out = append(out, Event{ID: r.ID, Key: r.AggID, Seq: r.Seq})
	}
	return out
}
