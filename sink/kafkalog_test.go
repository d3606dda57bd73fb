package sink

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestFailedLinesAreFranzGos: every line the sink's logger takes for "the
// client fails records" (failedLines) is logged, word for word, by the
// franz-go version go.mod names (its pkg/kgo sink.go or producer.go in the
// module cache), together with the keyvals the logger reads; and every
// line there that speaks of failing is either in failedLines or known not
// to fail records (notFailing). A franz-go upgrade that rewords a line, or
// adds one, fails here instead of letting a later record overtake a
// rejected batch.
func TestFailedLinesAreFranzGos(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/twmb/franz-go: %v", err)
	}
	version, dir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*github\.com/twmb/franz-go ` + regexp.QuoteMeta(version) + `\s*$`).Match(gomod) {
		t.Fatalf("go list says franz-go %s, which go.mod does not name", version)
	}
	var src strings.Builder
	for _, f := range []string{"sink.go", "producer.go"} {
		b, err := os.ReadFile(filepath.Join(dir, "pkg", "kgo", f))
		if err != nil {
			t.Fatalf("franz-go %s: %v", version, err)
		}
		src.Write(b)
	}
	text := src.String()
	known := map[string]bool{}
	for _, f := range failedLines {
		known[f.msg] = true
	}
	for _, m := range regexp.MustCompile(`Log\(LogLevel\w+, "([^"]*)"`).FindAllStringSubmatch(text, -1) {
		if msg := m[1]; strings.Contains(strings.ToLower(msg), "fail") && !known[msg] && !notFailing[msg] {
			t.Errorf("franz-go %s logs %q: if it fails records, add it to failedLines, else to notFailing", version, msg)
		}
	}
	for _, f := range failedLines {
		call := strings.Index(text, strconv.Quote(f.msg))
		if call < 0 {
			t.Errorf("franz-go %s logs no line %q: find what it logs now before failing those records, and update failedLines", version, f.msg)
			continue
		}
		// The keyvals the logger reads are in the same call.
		end := strings.Index(text[call:], "\n\t\t)")
		if nl := strings.Index(text[call:], ")\n"); end < 0 || nl >= 0 && nl < end {
			end = nl
		}
		args := text[call : call+end]
		if f.scope == "topic" && !strings.Contains(args, `"topic", `) {
			t.Errorf("franz-go %s logs %q without the topic: %s", version, f.msg, args)
		}
		if f.when != "" && !strings.Contains(args, strconv.Quote(f.when)) {
			t.Errorf("franz-go %s logs %q without %s: %s", version, f.msg, f.when, args)
		}
	}
}

// notFailing are franz-go's lines that speak of failing and fail no
// record: a retry, or the producer id failed for the next produce to
// renew (the records are failed, if at all, on a line of failedLines).
var notFailing = map[string]bool{
	"produce request failed with a retryable error, retrying without a metadata update":            true,
	"produce request failed, triggering metadata update":                                           true,
	"new topic metadata wait failed, retrying wait":                                                true,
	"ignoring a fail producer id because our producer id has already been failed":                  true,
	"ignoring a fail producer id request due to current id being different":                        true,
	"producer ID failed due to a produce error, next produce will reinitialize the producer epoch": true,
	"producer id initialization failure due to dying client":                                       true,
	"producer id initialization failure, discarding initialization attempt":                        true,
}

// TestFailedScope: the logger reads the topic (or every topic) and the
// condition of each line.
func TestFailedScope(t *testing.T) {
	cases := []struct {
		msg     string
		keyvals []any
		topic   string
		ok      bool
	}{
		{"batch in a produce request failed", []any{"broker", "1", "topic", "t1", "partition", int32(0)}, "t1", true},
		{"batch errored, failing the producer ID", []any{"topic", "t2", "err", "x"}, "t2", true},
		{"produce partition load error, bumping error count on first stored batch", []any{"topic", "t3", "will_fail", true}, "t3", true},
		{"produce partition load error, bumping error count on first stored batch", []any{"topic", "t3", "will_fail", false}, "t3", false},
		{"fatal InitProducerID error, failing all buffered records", []any{"broker", "1", "err", "x"}, "", true},
		{"produced", []any{"topic", "t1"}, "", false},
	}
	for _, c := range cases {
		topic, ok := failedScope(c.msg, c.keyvals)
		if topic != c.topic || ok != c.ok {
			t.Errorf("%q %v: topic %q, %v; want %q, %v", c.msg, c.keyvals, topic, ok, c.topic, c.ok)
		}
	}
}
