package residency

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// residentFileKB is RssFile of /proc/self/status in kB, read here rather
// than by the code under test.
func residentFileKB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "RssFile:" {
			n, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestTrimDropsTheExecutablesReadOnlyPages: right after TrimOnce fewer of
// the test binary's file pages are resident than before (what ran since is
// mapped again, 64 KiB around each page it touched: much of a binary this
// small), and a second call does nothing. The walrelay executable's
// figures: TestStartupPagesLeaveTheResidentSet (test/e2e/kafkaside).
func TestTrimDropsTheExecutablesReadOnlyPages(t *testing.T) {
	kb0 := residentFileKB(t)
	before, after, ok, err := TrimOnce()
	kb1 := residentFileKB(t)
	t.Logf("RssFile %d kB before the trim, %d kB after (TrimOnce's own readings: %d -> %d bytes)", kb0, kb1, before, after)
	if err != nil || !ok {
		t.Fatalf("TrimOnce: ok %v, error %v", ok, err)
	}
	if kb1 >= kb0 {
		t.Errorf("RssFile %d kB after the trim, %d kB before: want fewer", kb1, kb0)
	}
	if _, _, again, err := TrimOnce(); again || err != nil {
		t.Errorf("second TrimOnce: ok %v, error %v; want nothing done", again, err)
	}
}

// TestReadOnlyMappingsOfTheExecutableOnly: of a maps file, the private
// mappings of the path that are not writable, nothing else.
func TestReadOnlyMappingsOfTheExecutableOnly(t *testing.T) {
	maps := `00400000-010bc000 r-xp 00000000 08:01 123 /usr/bin/walrelay
010bc000-01f39000 r--p 00cbc000 08:01 123 /usr/bin/walrelay
01f39000-01fe4000 rw-p 01b39000 08:01 123 /usr/bin/walrelay
01fe4000-02000000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--s 00000000 08:01 124 /usr/bin/walrelay
7f0000002000-7f0000003000 r-xp 00000000 08:01 125 /usr/lib/other
7f0000004000-7f0000005000 r--p 00000000 08:01 126 /usr/bin/walrelay (deleted)
`
	path := t.TempDir() + "/maps"
	if err := os.WriteFile(path, []byte(maps), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readOnlyMappings(path, "/usr/bin/walrelay")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uintptr{{0x400000, 0x10bc000}, {0x10bc000, 0x1f39000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("readOnlyMappings = %x, want %x", got, want)
	}
}
