package explore

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// defaultSeeds is the handful `make test` runs (about 2 minutes once
// walrelay passes them): fixed draws that cover plain, range (a partition
// attached mid-run), list and hash outboxes, every payload type but text
// (the refusals draw it), single-row to 3,000-row transactions with wide
// rows, every topic setting (a small max.message.bytes under 3,000-row
// transactions), both poison policies, every fault but a Kafka restart (a
// minute on this machine: make explore has it), and two refusals; with
// the dimensions added later they draw LATIN1, WIN1252 and UTF8 databases,
// domains, citext, key renames and the role's bytea_output = escape, and
// 42 (the role's client_encoding = LATIN1 and a backlog older than a
// topic's timestamp bound), 77 (such a backlog alone) and 126 (an enum
// aggregate type, the role's statement_timeout = 100ms) add the rest.
// Print one with WALRELAY_EXPLORE_SEED=N go test -v -run TestExplore.
var defaultSeeds = []uint64{5, 7, 10, 13, 20, 22, 24, 25, 38, 39, 133, 42, 77, 126}

// seeds returns the cases to run: WALRELAY_EXPLORE_SEED=N alone, or
// EXPLORE_CASES=N from WALRELAY_EXPLORE_BASE (default: the clock), only
// those in WALRELAY_EXPLORE_WHERE if set, or the default handful.
func seeds(t *testing.T) []uint64 {
	t.Helper()
	env := func(name string) (uint64, bool) {
		v := os.Getenv(name)
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a non-negative integer", name, v)
		}
		return n, true
	}
	if s, ok := env("WALRELAY_EXPLORE_SEED"); ok {
		return []uint64{s}
	}
	n, ok := env("EXPLORE_CASES")
	if !ok {
		return defaultSeeds
	}
	base, ok := env("WALRELAY_EXPLORE_BASE")
	if !ok {
		base = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	where := whereOf(t, os.Getenv("WALRELAY_EXPLORE_WHERE"))
	var out []uint64
	for seed := base; uint64(len(out)) < n; seed++ {
		if seed-base > 1000*n {
			t.Fatalf("WALRELAY_EXPLORE_WHERE=%s: no %d of %d draws match", os.Getenv("WALRELAY_EXPLORE_WHERE"), n, seed-base)
		}
		if where.matches(draw(newRand(seed))) {
			out = append(out, seed)
		}
	}
	return out
}

// where is a region of the space: dimension -> value, e.g. from
// WALRELAY_EXPLORE_WHERE=table=plain,extra=bytea-100k.
type where map[string]string

func whereOf(t *testing.T, s string) where {
	t.Helper()
	w := where{}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		known := false
		for _, d := range space {
			known = known || (d.name == k && (slices.Contains(d.values, v) || v == "n/a"))
		}
		if !ok || !known {
			t.Fatalf("WALRELAY_EXPLORE_WHERE: %q is not dimension=value of the space (space_test.go)", kv)
		}
		w[k] = v
	}
	return w
}

func (w where) matches(c config) bool {
	for k, v := range w {
		if c[k] != v {
			return false
		}
	}
	return true
}

// TestExplore runs each case as a subtest named by its seed, then prints
// the coverage of the space and the failures with their seeds. The cases
// that restart a server (testbed.Disrupt) run first, one at a time and
// alone on the bed; the others then run beside each other (t.Parallel):
// each has its own database, role, slot, topics and proxies.
func TestExplore(t *testing.T) {
	list := seeds(t)
	outs := make([]caseOutcome, len(list))
	t.Cleanup(func() { summarize(t, outs) }) // after every subtest, parallel ones included
	for _, alone := range []bool{true, false} {
		for i, seed := range list {
			if disruptive(draw(newRand(seed))) != alone {
				continue
			}
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				if !alone {
					t.Parallel()
				}
				defer func() { outs[i].failed = t.Failed() }()
				runCase(t, seed, &outs[i])
			})
		}
	}
}

// summarize logs the coverage of the cases run and the failed ones.
func summarize(t *testing.T, outs []caseOutcome) {
	cv := coverage{}
	var failed []string
	for _, out := range outs {
		cv.add(out.cfg)
		if out.failed {
			failed = append(failed, fmt.Sprintf("  seed=%d %s\n    %s", out.seed, out.cfg, out.result))
		}
	}
	t.Log("\n" + cv.table(len(outs)))
	if len(failed) > 0 {
		t.Logf("FAILED %d of %d cases (re-run one with WALRELAY_EXPLORE_SEED=N):\n%s", len(failed), len(outs), strings.Join(failed, "\n"))
	}
}

// TestSpaceDraws checks the declared space: every value is drawable and
// the draw of a seed is stable (the seed alone reproduces a case).
func TestSpaceDraws(t *testing.T) {
	cv := coverage{}
	for seed := uint64(0); seed < 2000; seed++ {
		c := draw(newRand(seed))
		if again := draw(newRand(seed)); again.String() != c.String() {
			t.Fatalf("seed %d draws %q, then %q", seed, c, again)
		}
		cv.add(c)
	}
	for _, d := range space {
		for _, v := range d.values {
			if cv[d.name][v] == 0 {
				t.Errorf("%s=%s: no case in 2000 draws it", d.name, v)
			}
		}
	}
}
