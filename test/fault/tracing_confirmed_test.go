package fault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestTracingKill9ConfirmedHaveSpans: with spans exported to a real
// OpenTelemetry Collector (walrelay's batch span processor at its
// defaults), walrelay is killed with SIGKILL while events are written one
// a transaction, right after the slot's confirmed_flush_lsn was read. An
// event whose commit the server had confirmed by then is never sent again,
// so its span from the killed process is the only one it gets: every such
// event must have an ended db-log-write span, acknowledged at its record,
// in the Collector's output. The commit positions are PostgreSQL's
// (pg_current_wal_lsn() read right after each commit: at or past the
// commit's end, so an event counted as confirmed was), the confirmed
// position pg_replication_slots'. The events not confirmed before the kill
// are sent again by the next process and must have a span too.
func TestTracingKill9ConfirmedHaveSpans(t *testing.T) {
	const service = "walrelay-fault-confirmed"
	col, e, relay := tracedRelay(t, service)
	w := newTracedWriter(t, e)

	// A steady stream of single-event transactions; walrelay is killed
	// while it relays them, once the slot is confirmed past the 100th of
	// at least 300: the events acknowledged in the last moments before the
	// kill are the ones whose spans may still wait for export.
	var confirmed pglogrepl.LSN
	deadline := time.Now().Add(3 * time.Minute)
	for {
		w.write(5)
		if relay.Exited() {
			t.Fatalf("walrelay exited: %v", relay.Err())
		}
		confirmed = e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
		if len(w.order) >= 300 && confirmed >= w.upper[w.order[99]] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot was not confirmed past the 100th event within 3 minutes (confirmed %s, %d events written)", confirmed, len(w.order))
		}
	}
	relay.Kill()
	var atKill []string // events confirmed before the kill
	for _, id := range w.order {
		if w.upper[id] <= confirmed {
			atKill = append(atKill, id)
		}
	}
	relay = e.StartRelay(t)
	relay.WaitStreaming()
	last := w.write(20)
	waitConfirmed(t, e, relay, last, "the slot to be confirmed past the last event")

	// Nothing lost: every event read back to the end offsets.
	offsets := recordsOf(t, e, w.order)

	// ended reports whether s is an ended db-log-write span of its event,
	// in the writer's trace, acknowledged at one of the event's records.
	ended := func(s testbed.Span) bool {
		id := s.Attributes["messaging.message.id"]
		return s.Service == service && s.Name == "db-log-write" && s.TraceID == w.trace[id] && s.StatusCode != 2 &&
			!s.End.IsZero() && !s.End.Before(s.Start) &&
			offsets[id][fmt.Sprintf("%s/%s/%s", s.Attributes["messaging.destination.name"],
				s.Attributes["messaging.destination.partition.id"], s.Attributes["messaging.kafka.offset"])]
	}
	withSpan := func(spans []testbed.Span) map[string]bool {
		ok := map[string]bool{}
		for _, s := range spans {
			if ended(s) {
				ok[s.Attributes["messaging.message.id"]] = true
			}
		}
		return ok
	}
	isConfirmed := map[string]bool{}
	for _, id := range atKill {
		isConfirmed[id] = true
	}
	// N.B. the spans of the events the next process sent (the others)
	// come after everything the killed one exported.
	spans := col.WaitSpans(t, 2*time.Minute, func(spans []testbed.Span) bool {
		ok := withSpan(spans)
		for _, id := range w.order {
			if !isConfirmed[id] && !ok[id] {
				return false
			}
		}
		return true
	})
	ok := withSpan(spans)
	var missing []string
	for _, id := range atKill {
		if !ok[id] {
			missing = append(missing, id)
		}
	}
	t.Logf("FIGURES events=%d confirmed_before_kill=%d (slot at %s) confirmed_without_span=%d spans=%d",
		len(w.order), len(atKill), confirmed, len(missing), len(spans))
	if len(missing) > 0 {
		first := missing[0]
		t.Fatalf("%d of %d events confirmed before the kill (slot at %s) have no ended db-log-write span in the Collector's output; the first: %s (committed by %s)",
			len(missing), len(atKill), confirmed, first, w.upper[first])
	}
}

// TestTracingGracefulStopResendsNothing: with spans exported, a graceful
// stop (SIGTERM) while events are written still confirms everything it
// sent, the spans below the final position exported first (the span gate
// passes at the drain, not a round later): started again, walrelay sends
// no event twice, and every event has an acknowledged span.
func TestTracingGracefulStopResendsNothing(t *testing.T) {
	const service = "walrelay-fault-graceful"
	col, e, relay := tracedRelay(t, service)
	w := newTracedWriter(t, e)
	w.write(300)

	// N.B. at once, while the last events are acknowledged.
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exited %d on SIGTERM, want 0", code)
	}
	relay = e.StartRelay(t)
	relay.WaitStreaming()
	last := w.write(1)
	waitConfirmed(t, e, relay, last, "the slot to be confirmed past the last event")
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, _, err := testbed.ReadToEnd(rctx, e.Bed.Brokers(), e.Topics(), testbed.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copies := map[string]int{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		copies[id]++
	}
	lost, dup := 0, 0
	for _, id := range w.order {
		switch {
		case copies[id] == 0:
			lost++
		case copies[id] > 1:
			dup += copies[id] - 1
		}
	}
	t.Logf("FIGURES events=%d lost=%d sent_again_after_the_graceful_stop=%d", len(w.order), lost, dup)
	if lost > 0 || dup > 0 {
		t.Fatalf("%d of %d events lost, %d sent again after a graceful stop; want 0 and 0", lost, len(w.order), dup)
	}
	col.WaitSpans(t, 2*time.Minute, func(spans []testbed.Span) bool {
		acked := map[string]bool{}
		for _, s := range spans {
			if s.Service == service && s.StatusCode != 2 && s.Attributes["messaging.kafka.offset"] != "" {
				acked[s.Attributes["messaging.message.id"]] = true
			}
		}
		for _, id := range w.order {
			if !acked[id] {
				return false
			}
		}
		return true
	})
}
