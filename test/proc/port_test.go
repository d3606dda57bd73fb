package proc

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortIsBelowTheEphemeralRange: FreePort's ports are under the
// kernel's ephemeral range (so no outgoing connection takes one before its
// server binds it), at or above portsFrom, and can be bound.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	below := ephemeralFrom()
	if below-portsFrom < 1000 {
		t.Fatalf("this machine's ephemeral range starts at %d: no room below it to test", below)
	}
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < portsFrom || p >= below {
			t.Fatalf("FreePort() = %d, want %d-%d (below the ephemeral range)", p, portsFrom, below-1)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("FreePort() = %d, which cannot be bound: %v", p, err)
		}
		l.Close()
		seen[p] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 calls of FreePort gave %d distinct ports, want them random", len(seen))
	}
}
