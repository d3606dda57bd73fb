package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// readmeBlock is one fenced block of README.md.
type readmeBlock struct {
	info string // the fence's info string: "sh walkthrough", "text walkthrough", ...
	body string
	line int // of the opening fence
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{info: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// walkStep is a README shell block to run and the output the README shows
// for it, if any.
type walkStep struct {
	readmeBlock
	want string
}

// walkthroughSteps are the README's ```sh walkthrough blocks, in order,
// each with the ```text walkthrough block that follows it (its output).
func walkthroughSteps(t *testing.T) []walkStep {
	t.Helper()
	var steps []walkStep
	for _, b := range readmeBlocks(t) {
		switch b.info {
		case "sh walkthrough":
			steps = append(steps, walkStep{readmeBlock: b})
		case "text walkthrough":
			if len(steps) == 0 || steps[len(steps)-1].want != "" {
				t.Fatalf("README.md:%d: a ```text walkthrough block (the output of the ```sh walkthrough block before it) follows no such block", b.line)
			}
			steps[len(steps)-1].want = b.body
		}
	}
	if len(steps) < 8 {
		t.Fatalf("README.md has %d ```sh walkthrough blocks; the walk-through has at least 8", len(steps))
	}
	return steps
}

// placeholder is how the README writes a value that differs from run to
// run: <database>, <lsn>, ...
var placeholder = regexp.MustCompile(`<[a-z][a-z0-9 _-]*>`)

// matchOutput checks that every line of want appears in got, in order,
// each line of want a pattern where a placeholder matches any text.
func matchOutput(want, got string) error {
	lines := strings.Split(got, "\n")
	i := 0
	for _, w := range strings.Split(want, "\n") {
		w = strings.TrimSpace(w)
		if w == "" || w == "..." {
			continue
		}
		parts := placeholder.Split(w, -1)
		for k := range parts {
			parts[k] = regexp.QuoteMeta(parts[k])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for ; i < len(lines) && !re.MatchString(strings.TrimSpace(lines[i])); i++ {
		}
		if i == len(lines) {
			return fmt.Errorf("no line matches %q (in order)", w)
		}
		i++
	}
	return nil
}

// TestReadmeWalkthrough runs the README's "Against your own servers"
// walk-through as written: its ```sh walkthrough blocks, in order, in one
// bash (so that `walrelay run ... &` and `kill %1` work as they would in a
// terminal), against servers of its own, with walrelay and the README's
// variables ($DB, $RELAY_DB, $KAFKA, WALRELAY_SETUP_ROLE_PASSWORD) set; each
// block must succeed and print what the README shows after it. Then the
// truth from outside walrelay: the order's record read back with a real
// consumer, and the slot's confirmed position past the order's commit (from
// a witness slot) before the teardown dropped it.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	steps := walkthroughSteps(t)
	// N.B. the blocks run psql and kcat as a reader would: without one, a
	// block that retries until it succeeds would wait for its timeout.
	for _, tool := range [][2]string{{"psql", "postgresql-client"}, {"kcat", "kcat"}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Fatalf("the walk-through runs %s, which is not in PATH: apt-get install -y %s", tool[0], tool[1])
		}
	}
	// N.B. servers of its own: the walk-through creates the role walrelay
	// and writes to outbox.event.order, which are cluster-wide.
	b := testbed.StartForTest(t, testbed.Options{PG: true, Kafka: true, KafkaHeapMB: 512})
	dsn := b.NewDatabase(t)
	const rolePassword = "walk-through-pw"
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("walrelay", rolePassword)
	relayDSN := u.String()
	wit := harness.NewWitness(t, &harness.Env{Bed: b, DSN: dsn})
	// N.B. proc.FreePort: a port the kernel picked here was taken as
	// another connection's source port before walrelay bound it, under
	// make test's three beds and a suite beside them.
	httpAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}

	// The steps, cut where the test checks the slot: after walrelay
	// stopped, before the teardown drops it.
	cut := -1
	for i, s := range steps {
		if strings.Contains(s.body, "pg_drop_replication_slot") {
			cut = i
			break
		}
	}
	if cut < 1 {
		t.Fatalf("no ```sh walkthrough block drops the slot (the teardown)")
	}
	work := t.TempDir()
	env := append(os.Environ(),
		"PATH="+filepath.Dir(relayBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DB="+dsn, "RELAY_DB="+relayDSN, "KAFKA="+strings.Join(b.Brokers(), ","),
		"WALRELAY_SETUP_ROLE_PASSWORD="+rolePassword,
		// N.B. a port of its own (the README's default is :8080), which
		// `walrelay health` follows.
		"WALRELAY_HTTP_ADDR="+httpAddr,
		"PGCONNECT_TIMEOUT=10",
	)
	runSteps := func(steps []walkStep, first int) {
		t.Helper()
		var script strings.Builder
		script.WriteString("set -euo pipefail\n")
		for i, s := range steps {
			fmt.Fprintf(&script, "echo '@@step %d@@'\n%s", first+i, s.body)
		}
		script.WriteString("echo '@@end@@'\n")
		out, err := os.Create(filepath.Join(work, fmt.Sprintf("steps-%d.out", first)))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
		cmd.Dir, cmd.Env = work, env
		// N.B. a file, not a pipe, so that Wait does not wait for a
		// walrelay left in the background; its own process group, killed
		// at the end with whatever it started.
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		runErr := cmd.Run()
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		raw, err := os.ReadFile(out.Name())
		if err != nil {
			t.Fatal(err)
		}
		outputs := map[int]string{}
		last, ended := -1, false
		for _, line := range strings.SplitAfter(string(raw), "\n") {
			var n int
			switch {
			case strings.TrimSpace(line) == "@@end@@":
				ended = true
			case func() bool { _, err := fmt.Sscanf(strings.TrimSpace(line), "@@step %d@@", &n); return err == nil }():
				last = n
			case last >= 0:
				outputs[last] += line
			}
		}
		if runErr != nil || !ended {
			s := steps[last-first]
			t.Fatalf("README.md:%d: the walk-through stopped in this block (%v):\n%s\noutput:\n%s\nwalrelay.log:\n%s", s.line, runErr, s.body, outputs[last], tail(filepath.Join(work, "walrelay.log")))
		}
		for i, s := range steps {
			if s.want == "" {
				continue
			}
			if err := matchOutput(s.want, outputs[first+i]); err != nil {
				t.Errorf("README.md:%d: the block's output is not what the README shows: %v\nblock:\n%s\nREADME shows:\n%s\noutput:\n%s", s.line, err, s.body, s.want, outputs[first+i])
			}
		}
	}

	runSteps(steps[:cut], 0)

	// The order's event, read back by a consumer of its own.
	recs := b.ConsumeAll(t, []string{"outbox.event.order"}, 2*time.Second)
	if len(recs) != 1 {
		t.Fatalf("outbox.event.order holds %d records, want the order's one", len(recs))
	}
	r := recs[0]
	if et, _ := harness.Header(r, "eventType"); string(r.Key) != "42" || et != "OrderCreated" || string(r.Value) != `{"total": 99.50, "orderId": 42}` {
		t.Errorf("record key %q, eventType %q, value %s; want 42, OrderCreated, the order's payload", r.Key, et, r.Value)
	}
	var xid uint32
	if err := b.QueryRow(t, dsn, `SELECT xmin::text::bigint FROM outbox WHERE aggregateid = '42'`).Scan(&xid); err != nil {
		t.Fatalf("read the order's transaction id: %v", err)
	}
	end, ok := wit.CommitEnds(t)[xid]
	if !ok {
		t.Fatalf("the witness slot saw no commit of transaction %d", xid)
	}
	if slot := b.Slot(t, dsn, "walrelay"); !slot.Exists || slot.Active || slot.ConfirmedFlushLSN < end {
		t.Errorf("slot walrelay after the stop: exists %v, active %v, confirmed %s; want inactive, confirmed at or past the order's commit end %s",
			slot.Exists, slot.Active, slot.ConfirmedFlushLSN, end)
	}
	if log := tail(filepath.Join(work, "walrelay.log")); !strings.Contains(log, `"msg":"stopping","signal":"terminated"`) {
		t.Errorf("walrelay.log does not show a graceful stop:\n%s", log)
	}

	runSteps(steps[cut:], cut)

	if b.Slot(t, dsn, "walrelay").Exists {
		t.Errorf("the teardown left slot walrelay")
	}
	var n int
	if err := b.QueryRow(t, dsn, `SELECT (SELECT count(*) FROM pg_roles WHERE rolname = 'walrelay') + (SELECT count(*) FROM pg_publication WHERE pubname = 'walrelay')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the teardown left the role or the publication walrelay")
	}
}

// tail is the last 40 lines of file, or why not.
func tail(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
