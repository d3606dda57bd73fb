package fleet

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/sink"
)

// The process's max-inflight-bytes at the top of the file: a pool the
// pipelines share when their own bounds add up past it; a pipeline whose
// own bound is larger is refused with the fix.
func TestProcessInflight(t *testing.T) {
	pipes := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString("pipelines:\n")
		for i := range n {
			b.WriteString("  - name: p" + string(rune('a'+i)) + "\n    pg-url: postgres://localhost/d" + string(rune('a'+i)) + "\n    slot: s\n")
			if i == 1 {
				b.WriteString(extra)
			}
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, file string
		pool       int64  // 0: no pool
		reserve    int64  // each pipeline's share
		mistake    string // "": none
	}{
		{name: "three default pipelines under the default", file: pipes(3, "")},
		{name: "twenty default pipelines past the default", file: pipes(20, ""), pool: 16 * sink.DefaultMaxInflightBytes, reserve: 16 * sink.DefaultMaxInflightBytes / 40},
		{name: "set and binding", file: "max-inflight-bytes: 32MiB\n" + pipes(4, ""), pool: 32 << 20, reserve: 4 << 20},
		{name: "set and not binding", file: "max-inflight-bytes: 1GiB\n" + pipes(4, "")},
		{name: "a pipeline's own above it", file: "max-inflight-bytes: 32MiB\n" + pipes(3, "    max-inflight-bytes: 64MiB\n"),
			mistake: `f.yaml:9: pipeline "pb": max-inflight-bytes 64.0 MiB is more than the process's max-inflight-bytes 32.0 MiB (line 1), which every pipeline shares: lower the pipeline's (under it or under defaults:) or raise the process's at the top of the file`},
		{name: "the defaults' above it", file: "max-inflight-bytes: 32MiB\ndefaults:\n  max-inflight-bytes: 33MiB\n" + pipes(2, ""),
			mistake: `f.yaml:3: pipeline "pa": max-inflight-bytes 33.0 MiB is more than`},
		{name: "not a size", file: "max-inflight-bytes: lots\n" + pipes(2, ""), mistake: `f.yaml:1: max-inflight-bytes: "lots": want a number of bytes`},
		{name: "zero", file: "max-inflight-bytes: 0\n" + pipes(2, ""), mistake: `f.yaml:1: max-inflight-bytes: "0": want the bytes every pipeline's records may hold together`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, _ := testPipeline()
			plans, ms := load([]byte(tc.file), top, testPipeline)
			if len(ms) > 0 {
				t.Fatalf("load: %s", format("f.yaml", ms))
			}
			pool, ms := processInflight([]byte(tc.file), testPipeline, plans)
			got := strings.TrimSpace(format("f.yaml", ms))
			if tc.mistake == "" && len(ms) > 0 || tc.mistake != "" && !strings.Contains(got, tc.mistake) {
				t.Fatalf("mistakes:\n%s\nwant: %q", got, tc.mistake)
			}
			switch {
			case tc.pool == 0 && pool != nil:
				t.Errorf("pool of %d bytes, want none", pool.Limit())
			case tc.pool != 0 && pool == nil:
				t.Errorf("no pool, want %d bytes", tc.pool)
			case tc.pool != 0 && (pool.Limit() != tc.pool || pool.Reserve() != tc.reserve):
				t.Errorf("pool %d bytes, %d reserved each; want %d, %d", pool.Limit(), pool.Reserve(), tc.pool, tc.reserve)
			}
		})
	}
}
