package checkpoint

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestAckedSince: the confirmation lag's start is the watermark's first
// move after the last ClearAcked that found everything acknowledged
// confirmed; a Raise (PostgreSQL's own position) is no acknowledgement.
func TestAckedSince(t *testing.T) {
	tr := New(start)
	if !tr.AckedSince().IsZero() {
		t.Fatalf("AckedSince = %v before any acknowledgement, want zero", tr.AckedSince())
	}
	if !tr.Raise(start + 0x10) {
		t.Fatal("Raise refused with nothing registered")
	}
	if !tr.AckedSince().IsZero() {
		t.Fatalf("AckedSince = %v after a Raise, want zero", tr.AckedSince())
	}
	commit := func(end uint64) {
		x := tr.Begin(start + 0x10)
		x.Add(1)
		x.Close(start + 0x10 + pglogrepl.LSN(end))
		x.Ack()
	}
	commit(0x100)
	first := tr.AckedSince()
	if first.IsZero() {
		t.Fatal("AckedSince is zero after the watermark moved")
	}
	commit(0x200)
	if got := tr.AckedSince(); !got.Equal(first) {
		t.Fatalf("AckedSince = %v after a second move, want the first's %v", got, first)
	}
	// Confirmed up to the first transaction only: the second still waits.
	tr.ClearAcked(first, start+0x110)
	if got := tr.AckedSince(); !got.Equal(first) {
		t.Fatalf("AckedSince = %v after a partial confirmation, want %v kept", got, first)
	}
	tr.ClearAcked(first, start+0x210)
	if got := tr.AckedSince(); !got.IsZero() {
		t.Fatalf("AckedSince = %v once everything acknowledged was confirmed, want zero", got)
	}
	commit(0x300)
	again := tr.AckedSince()
	if again.IsZero() || again.Before(first) {
		t.Fatalf("AckedSince = %v after a new move, want a new stamp at or after %v", again, first)
	}
	// A stale since (another stamp in between) clears nothing.
	tr.ClearAcked(first, start+0x310)
	if got := tr.AckedSince(); !got.Equal(again) && !again.Equal(first) {
		t.Fatalf("AckedSince = %v after ClearAcked with a stale stamp, want %v kept", got, again)
	}
}
