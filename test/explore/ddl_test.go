package explore

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/harness"
)

// tsBound is the message.timestamp.before.max.ms of a ts-bound case's
// topics: records stamped more than this before the broker's clock are
// rejected.
const tsBound = 10 * time.Second

// backlog stops walrelay gracefully, lets the writers commit a backlog
// until its first transaction is older than tsBound, and starts walrelay
// again: the backlog's commit times are outside the topics' bound.
func (x *explorer) backlog() {
	t := x.t
	x.relay.HTTPAddr() // N.B. a process that catches SIGTERM (see inject)
	if code := x.relay.Stop(time.Minute); code != 0 {
		t.Errorf("ts-bound: walrelay exit code %d after SIGTERM, want 0", code)
	}
	x.retire()
	before := x.w.Committed()
	var first time.Time // when a transaction committed after the stop was seen
	harness.WaitFor(t, 3*time.Minute, fmt.Sprintf("a backlog committed more than %s ago", tsBound), func() bool {
		if first.IsZero() {
			select {
			case <-x.writing.Done():
				// N.B. on a busy machine the writers can finish while
				// walrelay stops: the backlog is then what it had not
				// received, all committed before now.
				t.Logf("ts-bound: the writers finished (%d events) while walrelay stopped; the backlog is what it had not received", x.w.Committed())
				first = time.Now()
			default:
				if x.w.Committed() > before {
					first = time.Now()
				}
			}
			return false
		}
		return time.Since(first) > tsBound+time.Second
	})
	x.startRelay()
}

// renameRows is how many rows are written after the key column's rename.
const renameRows = 20

// renamed is a row written after the rename, as a UTF-8 session reads it.
type renamed struct {
	key, aggType, value string
	xid                 uint32
}

// renameKey renames the key column of every outbox table while walrelay
// streams and writes renameRows rows naming the new column. walrelay must
// stop with exit 2 naming --key-column, dead-letter none of them and
// confirm nothing past the first; started again with --key-column
// aggregate_id, it must deliver each to its topic with its key and value.
func (x *explorer) renameKey() string {
	t, e := x.t, x.e
	x.waitStreaming()
	for _, tb := range x.shape.Tables {
		e.Bed.Exec(t, e.DSN, "ALTER TABLE "+tb+" RENAME COLUMN aggregateid TO aggregate_id")
	}
	x.charsFunction("aggregate_id")
	rows := x.writeRenamed()
	ends := x.wit.CommitEnds(t)
	var first, last pglogrepl.LSN
	for id, r := range rows {
		end, ok := ends[r.xid]
		if !ok {
			t.Fatalf("rename: row %s (xid %d) has no commit position in the witness", id, r.xid)
		}
		if first == 0 || end < first {
			first = end
		}
		last = max(last, end)
	}
	confirmed := func() pglogrepl.LSN { return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN }
	harness.WaitFor(t, 3*time.Minute, "walrelay to stop at the renamed key column", func() bool {
		return x.relay.Exited() || confirmed() >= first
	})
	deadLettered := func() int {
		n := 0
		for _, r := range e.Bed.ConsumeAll(t, []string{x.dlq}, time.Second) {
			if id, _ := harness.Header(r, "walrelay.event.id"); rows[id].xid != 0 {
				n++
			}
		}
		return n
	}
	if !x.relay.Exited() {
		n := deadLettered()
		t.Errorf("rename: walrelay runs on after the key column's rename (want exit 2 naming --key-column): slot confirmed %s, at or past the first renamed row's commit end %s; %d of %d renamed rows dead-lettered",
			confirmed(), first, n, len(rows))
		return fmt.Sprintf("rename=not-stopped dead_lettered=%d", n)
	}
	code := x.relay.Wait(time.Second)
	x.retire()
	if code != 2 {
		t.Errorf("rename: exit code %d, want 2: %s", code, lastLine(x.relay.Log(), "walrelay: "))
	}
	if !strings.Contains(x.relay.Log(), "--key-column") {
		t.Errorf("rename: walrelay's log does not name --key-column: %s", lastLine(x.relay.Log(), "walrelay: "))
	}
	if c := confirmed(); c >= first {
		t.Errorf("rename: slot confirmed %s, at or past the first renamed row's commit end %s", c, first)
	}
	n := deadLettered()
	if n > 0 {
		t.Errorf("rename: %d of %d renamed rows dead-lettered", n, len(rows))
	}

	x.args = append(x.args, "--key-column", "aggregate_id")
	x.startRelay()
	harness.WaitFor(t, 3*time.Minute, fmt.Sprintf("walrelay with --key-column aggregate_id to confirm the last renamed row (%s)", last), func() bool {
		x.mustRun("with --key-column aggregate_id")
		return confirmed() >= last
	})
	got := map[string]bool{}
	wrong := 0
	for _, r := range e.Bed.ConsumeAll(t, e.Topics(), time.Second) {
		id, _ := harness.Header(r, "id")
		row, ok := rows[id]
		if !ok {
			continue
		}
		value := string(r.Value)
		if x.shape.PayloadType == "bytea" {
			value = hex.EncodeToString(r.Value)
		}
		if r.Topic != "outbox.event."+row.aggType || string(r.Key) != row.key || value != row.value {
			if wrong++; wrong <= 3 {
				t.Logf("renamed row %s: record in %s, key %q, value %q; the row's aggregate type %s, key %q, value %q",
					id, r.Topic, r.Key, trim(value), row.aggType, row.key, trim(row.value))
			}
		}
		got[id] = true
	}
	if len(got) < len(rows) || wrong > 0 {
		t.Errorf("rename: with --key-column aggregate_id, %d of %d renamed rows in Kafka, %d records other than their row", len(got), len(rows), wrong)
	}
	n += deadLettered()
	if n > 0 {
		t.Errorf("rename: %d renamed rows dead-lettered in all", n)
	}
	return fmt.Sprintf("rename=exit%d renamed=%d arrived=%d wrong=%d dead_lettered=%d", code, len(rows), len(got), wrong, n)
}

// writeRenamed writes renameRows rows to the first outbox table in four
// transactions, naming the renamed key column, and reads them back.
func (x *explorer) writeRenamed() map[string]renamed {
	t, e, s := x.t, x.e, x.shape
	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	payload := map[string]string{
		"jsonb": "jsonb_build_object('renamed', $5::int, 'note', $6::text)",
		"json":  "json_build_object('renamed', $5::int, 'note', $6::text)",
		"text":  "'renamed ' || $5::int || ' ' || $6::text",
		"bytea": "convert_to('renamed ' || $5::int || ' ' || $6::text, 'UTF8')",
		"null":  "(NULLIF($5::int, $5::int)::text || $6::text)::jsonb",
	}[s.PayloadType]
	insert := fmt.Sprintf(`INSERT INTO %s (id, aggregatetype, aggregate_id, type, payload, seq, part)
		VALUES ($1::text::%s, $2, $3::text::%s, 'OrderCreated', %s, 0, $4)`, s.Tables[0], s.IDType, s.KeyType, payload)
	var ids []string
	for i := 0; i < renameRows; i++ {
		id := map[string]string{"uuid": harness.NewUUID(), "bigint": strconv.Itoa(-1 - i)}[s.IDType]
		if id == "" {
			id = "renamed-" + strconv.Itoa(i)
		}
		ids = append(ids, id)
	}
	for i := 0; i < renameRows; i += renameRows / 4 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for j := i; j < i+renameRows/4; j++ {
			if _, err := tx.Exec(ctx, insert, ids[j], e.AggType(j), harness.KeyOf(s.KeyType, j%4), j%4, j, noteOf(x.c["encoding"])); err != nil {
				t.Fatalf("rename: insert a row: %v", err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	value := "payload::text"
	if s.PayloadType == "bytea" {
		value = "encode(payload, 'hex')"
	}
	rs, err := conn.Query(ctx, fmt.Sprintf(`SELECT id::text, aggregate_id::text, aggregatetype::text, coalesce(%s, ''), xmin::text
		FROM %s WHERE id::text = ANY($1)`, value, s.Tables[0]), ids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]renamed{}
	for rs.Next() {
		var id, xmin string
		var r renamed
		if err := rs.Scan(&id, &r.key, &r.aggType, &r.value, &xmin); err != nil {
			t.Fatal(err)
		}
		xid, err := strconv.ParseUint(xmin, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		r.xid = uint32(xid)
		out[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != renameRows {
		t.Fatalf("rename: read back %d of %d renamed rows", len(out), renameRows)
	}
	return out
}
