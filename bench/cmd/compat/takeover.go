package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/bench/internal/rig"
)

// TakeoverReport is one switch from a running Debezium connector to
// walrelay on Debezium's own slot and publication.
type TakeoverReport struct {
	Mode       string `json:"mode"` // "graceful" (connector deleted) or "kill -9" (worker killed)
	Rows       int    `json:"rows"` // committed while the switch happened
	Records    int    `json:"records"`
	Flushed    string `json:"debezium_confirmed_flush_lsn"`
	Duplicates int    `json:"duplicates"`
	// Problems: a committed row without a record, a record without a
	// committed row, a duplicate of a row committed at or before the
	// position Debezium confirmed.
	Problems []string `json:"problems"`
}

// takeoverWriter commits one outbox row a transaction until stopped, and
// keeps each row's id with the WAL position right after its commit (at or
// past the commit's end).
type takeoverWriter struct {
	mu    sync.Mutex
	after map[string]pglogrepl.LSN
	err   error
	stop  chan struct{}
	done  chan struct{}
}

func startTakeoverWriter(ctx context.Context, dsn string) (*takeoverWriter, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	w := &takeoverWriter{after: map[string]pglogrepl.LSN{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer conn.Close(context.WithoutCancel(ctx))
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			id := newUUID()
			_, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'Switched', jsonb_build_object('i', $4::int))`,
				id, []string{"Order", "Customer"}[i%2], fmt.Sprintf("tk-%d", i%13), i)
			var s string
			if err == nil {
				err = conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s)
			}
			var lsn pglogrepl.LSN
			if err == nil {
				lsn, err = pglogrepl.ParseLSN(s)
			}
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			w.after[id] = lsn
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// failed is the writer's error, nil while it writes.
func (w *takeoverWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *takeoverWriter) rows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.after)
}

func (w *takeoverWriter) finish() (map[string]pglogrepl.LSN, error) {
	close(w.stop)
	<-w.done
	return w.after, w.err
}

// takeover streams with a Debezium connector (StringConverter, the
// router's defaults, publication.autocreate.mode=all_tables: Debezium makes
// the publication FOR ALL TABLES and the slot), stops it mid-stream while
// a writer commits (kill: SIGKILL to the whole worker; otherwise the
// connector is deleted), then starts walrelay from import-debezium of the
// very same connector file, on Debezium's slot and topics, while the
// writer goes on. Over the union of both relays' records: no committed
// row is lost, none is invented, and a row is duplicated only if it was
// committed after the position Debezium had confirmed.
func takeover(ctx context.Context, env *rig.Env, bin string, w *rig.ConnectWorker, dsn, work string, kill bool) (*TakeoverReport, error) {
	rep := &TakeoverReport{Mode: "graceful"}
	tag := "g"
	if kill {
		rep.Mode, tag = "kill -9", "k"
	}
	name := "compat_takeover_" + tag
	pfx := "tk" + tag + "."
	topics := prefixed(pfx, []string{"Order", "Customer"})
	adm, err := rig.NewAdmin(env.Brokers)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	if err := adm.CreateTopics(ctx, partitions, keepForever(), topics...); err != nil {
		return nil, err
	}
	conf, err := configuration{}.connector(dsn, name, pfx)
	if err != nil {
		return nil, err
	}
	conf["table.include.list"] = "public.outbox"
	conf["publication.autocreate.mode"] = "all_tables"
	file := filepath.Join(work, name+".json")
	if err := writeConnectorFile(file, name, conf); err != nil {
		return nil, err
	}
	defer func() {
		if err := rig.DropSlot(context.WithoutCancel(ctx), dsn, name, name); err != nil {
			logf("%v", err)
		}
	}()
	if err := w.CreateConnector(ctx, name, conf); err != nil {
		return nil, err
	}
	slots, err := rig.NewSlotWatcher(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer slots.Close()
	// N.B. the writer starts once Debezium streams (its slot is active):
	// with snapshot.mode=no_data, rows before its slot exist are not its.
	if err := waitSlot(ctx, slots, name, true); err != nil {
		st, trace, _ := w.TaskState(ctx, name)
		return nil, fmt.Errorf("takeover (%s): debezium's slot: %w (task %s %s)", rep.Mode, err, st, trace)
	}
	wr, err := startTakeoverWriter(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := rig.ReadAll(ctx, env.Brokers, 100, readTimeout, topics...); err != nil {
		wr.finish()
		return nil, fmt.Errorf("takeover (%s): debezium: %w", rep.Mode, err)
	}
	if kill {
		err = w.Proc.Kill()
	} else {
		err = w.DeleteConnector(ctx, name)
	}
	if err != nil {
		wr.finish()
		return nil, err
	}
	if err := waitSlot(ctx, slots, name, false); err != nil {
		wr.finish()
		return nil, fmt.Errorf("takeover (%s): %w", rep.Mode, err)
	}
	st, err := slots.State(ctx, name)
	if err != nil {
		wr.finish()
		return nil, err
	}
	rep.Flushed = st.ConfirmedFlush.String()
	logf("takeover (%s): debezium stopped after %d rows, its slot confirmed to %s", rep.Mode, wr.rows(), st.ConfirmedFlush)

	imported, _, err := importSettings(ctx, bin, file)
	if err != nil {
		wr.finish()
		return nil, err
	}
	var penv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALRELAY_") {
			penv = append(penv, kv)
		}
	}
	p, err := rig.StartProc("walrelay", filepath.Join(work, name+".log"), append(penv, imported...),
		bin, "run", "--brokers", strings.Join(env.Brokers, ","), "--topic-partitions", fmt.Sprint(partitions), "--status-interval", "1s", "--http-addr", "")
	if err != nil {
		wr.finish()
		return nil, err
	}
	defer p.Stop(30 * time.Second)
	// The writer goes on while walrelay takes over: until walrelay streams
	// Debezium's slot and 100 more rows are committed.
	if err := waitSlot(ctx, slots, name, true); err != nil {
		wr.finish()
		return nil, fmt.Errorf("takeover (%s): walrelay on debezium's slot: %w; last lines of its log:\n%s", rep.Mode, err, p.Tail(20))
	}
	for streaming := wr.rows(); wr.rows() < streaming+100; {
		if wr.failed() != nil || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	after, err := wr.finish()
	if err != nil {
		return nil, fmt.Errorf("takeover (%s): writer: %w", rep.Mode, err)
	}
	rep.Rows = len(after)

	var recs []*kgo.Record
	deadline := time.Now().Add(readTimeout)
	for {
		recs, err = reread(ctx, env.Brokers, 3*time.Second, topics)
		if err != nil {
			return nil, err
		}
		if seen := ids(recs); allSeen(seen, after) || time.Now().After(deadline) || p.Exited() {
			break
		}
	}
	rep.Records = len(recs)
	seen := ids(recs)
	for id, n := range seen {
		lsn, ok := after[id]
		switch {
		case !ok:
			rep.Problems = append(rep.Problems, fmt.Sprintf("record of id %s, which no committed row has", id))
		case n > 1:
			rep.Duplicates += n - 1
			if lsn <= st.ConfirmedFlush {
				rep.Problems = append(rep.Problems, fmt.Sprintf("id %s: %d records, but its transaction ended at or before %s, where Debezium's slot was confirmed", id, n, lsn))
			}
		}
	}
	for id := range after {
		if seen[id] == 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("committed row %s has no record (lost)", id))
		}
	}
	if p.Exited() {
		rep.Problems = append(rep.Problems, fmt.Sprintf("walrelay exited: %v; last lines of its log:\n%s", p.Err(), p.Tail(20)))
	}
	logf("takeover (%s): %d rows, %d records, %d duplicates, %d problems", rep.Mode, rep.Rows, rep.Records, rep.Duplicates, len(rep.Problems))
	return rep, nil
}

func ids(recs []*kgo.Record) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		id, _ := header(r, "id")
		m[id]++
	}
	return m
}

func allSeen(seen map[string]int, rows map[string]pglogrepl.LSN) bool {
	for id := range rows {
		if seen[id] == 0 {
			return false
		}
	}
	return true
}

// waitSlot waits until slot exists and is active (active) or exists and
// is not (!active), at most readTimeout (a busy machine: Debezium takes
// up to a minute per connector to register its metrics).
func waitSlot(ctx context.Context, slots *rig.SlotWatcher, slot string, active bool) error {
	deadline := time.Now().Add(readTimeout)
	for {
		st, err := slots.State(ctx, slot)
		if err == nil && (st.ActivePID != 0) == active {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("slot %s not %s within %s (last: %+v, %v)", slot, map[bool]string{true: "active", false: "inactive"}[active], readTimeout, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
