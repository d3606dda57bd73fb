package inbox_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
)

// bulk is the BatchHandler of docs/inbox.md ("Bulk projections"), quoted
// there verbatim (TestDocQuotesRun): it compiles here against the
// package's API.
func bulk(ctx context.Context, tx pgx.Tx, rs []*kgo.Record) error {
	ids, customers := make([]string, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		ids[i], customers[i] = inbox.Header(r, "id"), string(r.Key)
	}
	// One statement for the whole batch, in the records' order.
	_, err := tx.Exec(ctx, `INSERT INTO order_log (event_id, customer)
		SELECT id, customer FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(id, customer, n) ORDER BY n`,
		ids, customers)
	return err
}

// ExampleBatchHandler sets a BatchHandler (docs/inbox.md).
func ExampleBatchHandler() {
	_ = inbox.Config{BatchHandler: bulk}
}

// quoteMark names the file a Go block of docs/inbox.md is quoted from.
var quoteMark = regexp.MustCompile("<!-- verbatim: (\\S+) -->\n```go\n")

// TestDocQuotesRun: every Go block of docs/inbox.md is quoted verbatim
// from the file named by the <!-- verbatim: path --> line above it (its
// lines there indented by up to two tabs, inside a function), a file a
// test compiles and runs: the quick start is examples/inbox/quickstart's
// main.go whole (run by TestQuickstart), the others come from tests.
func TestDocQuotesRun(t *testing.T) {
	doc, err := os.ReadFile("../docs/inbox.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Count(string(doc), "```go\n")
	marks := quoteMark.FindAllSubmatchIndex(doc, -1)
	if blocks == 0 || len(marks) != blocks {
		t.Fatalf("docs/inbox.md: %d Go blocks, %d of them under a <!-- verbatim: path --> line: want every one", blocks, len(marks))
	}
	for _, m := range marks {
		path := string(doc[m[2]:m[3]])
		block, _, ok := strings.Cut(string(doc[m[1]:]), "```\n")
		src, err := os.ReadFile("../" + path)
		if !ok || err != nil {
			t.Errorf("docs/inbox.md: the block quoting %s: no end, or %v", path, err)
			continue
		}
		if !quoted(block, string(src)) {
			t.Errorf("docs/inbox.md: this block is not in %s verbatim:\n%s", path, block)
		}
	}
	quick, err := os.ReadFile("../examples/inbox/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "<!-- verbatim: examples/inbox/quickstart/main.go -->\n```go\n"+string(quick)+"```\n") {
		t.Errorf("docs/inbox.md does not quote examples/inbox/quickstart/main.go whole")
	}
}

// quoted reports whether block is in src, its lines indented alike by
// zero, one or two tabs.
func quoted(block, src string) bool {
	for _, indent := range []string{"", "\t", "\t\t"} {
		lines := strings.SplitAfter(block, "\n")
		for i, l := range lines {
			if l != "\n" && l != "" {
				lines[i] = indent + l
			}
		}
		if strings.Contains(src, strings.Join(lines, "")) {
			return true
		}
	}
	return false
}
