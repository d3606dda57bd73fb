package pipeline

import (
	"runtime"
	"testing"

	"go.uber.org/zap"
)

// TestSetProcs: one processor unless GOMAXPROCS says otherwise, in which
// case the runtime's own reading of it stands.
func TestSetProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })

	runtime.GOMAXPROCS(3)
	env := map[string]string{}
	if n := SetProcs(func(k string) string { return env[k] }, zap.NewNop()); n != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("GOMAXPROCS unset: SetProcs says %d, runtime has %d; want 1", n, runtime.GOMAXPROCS(0))
	}

	runtime.GOMAXPROCS(3) // what the runtime made of GOMAXPROCS=3 at start
	env["GOMAXPROCS"] = "3"
	if n := SetProcs(func(k string) string { return env[k] }, zap.NewNop()); n != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("GOMAXPROCS=3: SetProcs says %d, runtime has %d; want 3 left alone", n, runtime.GOMAXPROCS(0))
	}
}
