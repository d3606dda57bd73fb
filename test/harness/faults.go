package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// Faults records the faults a test injects, each with the slot position
// confirmed before it and the WAL position once it was over.
type Faults struct {
	t    testing.TB
	e    *Env
	list []Fault
}

// NewFaults starts an empty record for e's slot.
func NewFaults(t testing.TB, e *Env) *Faults { return &Faults{t: t, e: e} }

// Injecting is a fault begun and not yet over.
type Injecting struct {
	f     *Faults
	fault Fault
}

// Begin reads the slot's confirmed position before a fault of kind is
// injected.
func (f *Faults) Begin(kind string) *Injecting {
	f.t.Helper()
	s := f.e.Bed.Slot(f.t, f.e.DSN, f.e.Slot)
	return &Injecting{f: f, fault: Fault{Kind: kind, ConfirmedBefore: s.ConfirmedFlushLSN}}
}

// Resumed lowers the fault's confirmed position to where PostgreSQL resumed
// the slot, if that is lower (see PGResumePositions).
func (in *Injecting) Resumed(lsn pglogrepl.LSN) {
	if lsn != 0 && lsn < in.fault.ConfirmedBefore {
		in.fault.ConfirmedBefore = lsn
	}
}

// End reads the WAL position once the fault is over and records the fault.
func (in *Injecting) End() Fault {
	in.f.t.Helper()
	in.fault.WALAfter = in.f.e.Bed.CurrentWALLSN(in.f.t, in.f.e.DSN)
	in.f.list = append(in.f.list, in.fault)
	return in.fault
}

// List returns the faults recorded.
func (f *Faults) List() []Fault { return slices.Clone(f.list) }

// Summary counts the faults by kind, e.g. "kill-9=10 cut=3".
func (f *Faults) Summary() string {
	n := map[string]int{}
	var kinds []string
	for _, x := range f.list {
		if n[x.Kind] == 0 {
			kinds = append(kinds, x.Kind)
		}
		n[x.Kind]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s=%d", k, n[k])
	}
	return strings.Join(parts, " ")
}

// LogOffset is the size of the test bed's PostgreSQL log: pass it to
// PGResumePositions to read what was logged after it.
func LogOffset(t testing.TB, e *Env) int64 {
	t.Helper()
	fi, err := os.Stat(e.Bed.PGLogPath())
	if err != nil {
		t.Fatalf("PostgreSQL log: %v", err)
	}
	return fi.Size()
}

var (
	startingRE = regexp.MustCompile(`\[(\d+)\] LOG:  starting logical decoding for slot "([^"]+)"`)
	detailRE   = regexp.MustCompile(`\[(\d+)\] DETAIL:  Streaming transactions committing after ([0-9A-F]+/[0-9A-F]+)`)
)

// PGResumePositions returns, from the PostgreSQL log after offset, the
// position each new session of slot started streaming after, as the
// walsender logs it ("Streaming transactions committing after X/Y").
//
// N.B. PostgreSQL before 17 writes a logical slot's confirmed_flush_lsn to
// disk only when its restart_lsn or catalog_xmin moves too (17 also at a
// shutdown checkpoint), so after a server restart a slot may resume before
// the position pg_replication_slots showed: what was confirmed since the last
// save is sent again. The walsender's own log line
// is the authority on where it resumed.
func PGResumePositions(t testing.TB, e *Env, offset int64) []pglogrepl.LSN {
	t.Helper()
	f, err := os.Open(e.Bed.PGLogPath())
	if err != nil {
		t.Fatalf("PostgreSQL log: %v", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	starting := map[string]bool{} // pids starting our slot
	var out []pglogrepl.LSN
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := startingRE.FindStringSubmatch(line); m != nil {
			starting[m[1]] = m[2] == e.Slot
			continue
		}
		if m := detailRE.FindStringSubmatch(line); m != nil && starting[m[1]] {
			delete(starting, m[1])
			lsn, err := pglogrepl.ParseLSN(m[2])
			if err != nil {
				t.Fatalf("PostgreSQL log: %v", err)
			}
			out = append(out, lsn)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("PostgreSQL log: %v", err)
	}
	return out
}

// WaitPGResumePositions is PGResumePositions once PostgreSQL has logged at
// least one session of the slot since offset: a walsender holds the slot
// (pg_replication_slots.active_pid) a moment before it logs where it
// starts decoding, so a look right after WaitStreaming can find nothing.
func WaitPGResumePositions(t testing.TB, e *Env, offset int64) []pglogrepl.LSN {
	t.Helper()
	var out []pglogrepl.LSN
	WaitFor(t, time.Minute, "PostgreSQL to log a new session of slot "+e.Slot, func() bool {
		out = PGResumePositions(t, e, offset)
		return len(out) > 0
	})
	return out
}
