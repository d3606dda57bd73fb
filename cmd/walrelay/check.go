package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/preflight"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/pipeline"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// checkResult is one line of `walrelay check`: a check's outcome, or why it
// was skipped.
type checkResult struct {
	preflight.Check
	skipped string // the failed check this one depends on
}

// needs names, for each check, the checks it depends on
// (pgcatalog.Preflight's names): "outbox columns" reads the tables'
// columns and "publication" checks that it lists them, which says nothing
// (or advises adding a table that does not exist) when a table is missing.
var needs = map[string][]string{
	"outbox columns": {"connect to PostgreSQL", "outbox tables exist"},
	"publication":    {"outbox tables exist"},
}

// skippedFor returns the first failed check that name depends on, or "".
func skippedFor(name string, failed map[string]bool) string {
	for _, need := range needs[name] {
		if failed[need] {
			return need
		}
	}
	return ""
}

// checkCmd runs every preflight check against PostgreSQL and Kafka without
// streaming or creating anything, and prints one line per check. A check
// that depends on a failed one says it was skipped.
func checkCmd(args []string, stdout, stderr io.Writer) int {
	var standbyURL string
	c, code := parseCommand("check", args, stderr, standbyFlag(&standbyURL), nil)
	if code >= 0 {
		return code
	}
	cfg, rc, dc, sc := c.cfg, c.rc, c.dc, c.sc
	var standbyWarnings []string
	if standbyURL != "" {
		var err error
		if _, standbyWarnings, err = replication.TLSPolicy("--pg-standby-url", standbyURL, cfg.pgVerifiedTLS); err != nil {
			fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", indent(err))
			return exitConfig
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// N.B. the slot markers are read (never written) so that check says
	// when run would stop on a slot that is gone.
	mc := c.markerConfig()
	mc.CreateTopic = false
	if ms, err := kafkastate.Open(ctx, mc, zap.NewNop()); err == nil {
		defer ms.Close()
		rc.History = ms
	}
	var results []checkResult
	failed := map[string]bool{}
	for _, ch := range pgcatalog.Preflight(ctx, rc, zap.NewNop()) {
		if hint, ok := pipeline.RefusalHint(ch.Err, rc.ConnString); ok {
			ch.Err = fmt.Errorf("%w: %s", ch.Err, hint)
		}
		r := checkResult{Check: ch, skipped: skippedFor(ch.Name, failed)}
		if r.skipped != "" {
			r.Check = preflight.Check{Name: ch.Name}
		}
		results = append(results, r)
		if ch.Err != nil || r.skipped != "" {
			failed[ch.Name] = true
		}
	}
	// N.B. a slot that exists (Debezium's, or walrelay's own): what it is
	// and that run streams from it.
	if !failed["replication slot"] && !failed["publication"] {
		if ch, ok := pgcatalog.Takeover(ctx, rc); ok {
			results = append(results, checkResult{Check: ch})
		}
	}
	columns := checkResult{Check: preflight.Check{Name: "outbox columns"}, skipped: skippedFor("outbox columns", failed)}
	if columns.skipped == "" {
		columns.Err = pipeline.CheckColumns(ctx, rc.ConnString, rc.Publication, dc)
		columns.Note = "every mapped and template column exists, has a type its flag takes and is sent by pgoutput"
		if dc.NoTables {
			columns.Note = "none: --source messages reads each event's fields from its message's JSON content"
		}
	}
	results = append(results, columns)
	if rc.Messages && !failed["connect to PostgreSQL"] {
		results = append(results, checkResult{Check: checkMessages(ctx, rc, dc)})
	}
	if standbyURL != "" {
		ch := checkStandby(ctx, rc, standbyURL)
		ch.Warnings = append(ch.Warnings, standbyWarnings...)
		results = append(results, checkResult{Check: ch})
	}
	for i, ch := range sink.Preflight(ctx, sc, kafkastate.Preflight(mc.Topic, sc.CreateTopics)) {
		if i == 0 {
			// N.B. check reports warnings as WARN lines, as Preflight's.
			ch.Warnings = append(ch.Warnings, cfg.securityWarnings...)
		}
		if hint, ok := pipeline.RefusalHint(ch.Err, rc.ConnString); ok {
			ch.Err = fmt.Errorf("%w: %s", ch.Err, hint)
		}
		results = append(results, checkResult{Check: ch})
	}
	if cfg.exactlyOnce {
		for _, ch := range sink.PreflightExactlyOnce(ctx, sc) {
			results = append(results, checkResult{Check: ch})
		}
	}
	nFailed, nSkipped, nWarned := 0, 0, 0
	for _, r := range results {
		switch {
		case r.skipped != "":
			nSkipped++
			fmt.Fprintf(stdout, "SKIP  %s: not checked, because %q failed\n", r.Name, r.skipped)
		case r.Err != nil:
			nFailed++
			fmt.Fprintf(stdout, "FAIL  %s: %v\n", r.Name, r.Err)
		case r.Note != "":
			fmt.Fprintf(stdout, "PASS  %s: %s\n", r.Name, r.Note)
		default:
			fmt.Fprintf(stdout, "PASS  %s\n", r.Name)
		}
		for _, w := range r.Warnings {
			nWarned++
			fmt.Fprintf(stdout, "WARN  %s: %s\n", r.Name, w)
		}
	}
	extra := ""
	if nSkipped > 0 {
		extra = fmt.Sprintf(", %d skipped", nSkipped)
	}
	if nWarned > 0 {
		extra += fmt.Sprintf(", %d warning(s): see the WARN lines", nWarned)
	}
	if nFailed > 0 {
		fmt.Fprintf(stdout, "%d of %d checks failed%s\n", nFailed, len(results), extra)
		return exitConfig
	}
	fmt.Fprintf(stdout, "all %d checks passed%s\n", len(results), extra)
	return exitOK
}

// standbyFlag adds --pg-standby-url (check and status).
func standbyFlag(url *string) func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.StringVar(url, "pg-standby-url", "", "connection string of a physical standby (PostgreSQL 17+): check and status report whether it has the slot synchronized (synced, not temporary, not invalidated) and how far it is behind the primary's")
	}
}

// checkStandby is the "standby slot" check: whether a promotion of the
// standby at url keeps the slot, and how far its copy is behind.
func checkStandby(ctx context.Context, rc replication.Config, url string) preflight.Check {
	ch := preflight.Check{Name: "standby has the slot synchronized"}
	ss, err := pgcatalog.QueryStandbySlot(ctx, url, rc.Slot)
	if err != nil {
		ch.Err = err
		return ch
	}
	if problems := ss.Problems(rc.Slot); len(problems) > 0 {
		ch.Err = errors.New(strings.Join(problems, "; "))
		return ch
	}
	ch.Note = fmt.Sprintf("synced, confirmed_flush_lsn %s", ss.Confirmed)
	if behind, ok := standbyBehind(ctx, rc, ss); ok {
		ch.Note += fmt.Sprintf(", %d bytes behind the primary's slot (relayed again after a promotion)", behind)
	}
	return ch
}

// standbyBehind is how many bytes the standby's copy of the slot is behind
// the primary's.
func standbyBehind(ctx context.Context, rc replication.Config, ss pgcatalog.StandbySlot) (int64, bool) {
	conn, err := pgx.Connect(ctx, rc.ConnString)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := pgcatalog.QuerySlot(ctx, conn, rc.Slot)
	if err != nil || !st.Exists {
		return 0, false
	}
	return int64(st.Confirmed) - int64(ss.Confirmed), true
}

// pgTLSWarnings logs, for the commands that run no Preflight (status,
// setup), the warnings about --pg-url and --pg-standby-url below
// verify-full on a host other than loopback; a standby URL that
// --pg-require-verified-tls refuses is printed and false returned (exit 2).
// (--pg-url was refused by the configuration's validation already.)
func pgTLSWarnings(c *command, standbyURL string, stderr io.Writer) bool {
	check := func(what, url string) bool {
		hosts, warnings, err := replication.TLSPolicy(what, url, c.cfg.pgVerifiedTLS)
		if err != nil {
			fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", indent(err))
			return false
		}
		for _, w := range warnings {
			c.log.Warn("postgresql connection not verified: "+w, zap.String("sslmode", hosts[0].Mode))
		}
		return true
	}
	if !check("--pg-url", c.rc.ConnString) {
		return false
	}
	return standbyURL == "" || check("--pg-standby-url", standbyURL)
}

// checkMessages is the "message source" check: what the message source
// relays, and whether walrelay.emit (walrelay setup) exists.
func checkMessages(ctx context.Context, rc replication.Config, dc decode.Config) preflight.Check {
	ch := preflight.Check{Name: "message source"}
	conn, err := pgx.Connect(ctx, rc.ConnString)
	if err != nil {
		ch.Err = fmt.Errorf("connect to postgresql: %w", err)
		return ch
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var emit bool
	if err := conn.QueryRow(ctx, `SELECT to_regprocedure('walrelay.emit(text,text,text,jsonb)') IS NOT NULL`).Scan(&emit); err != nil {
		ch.Err = fmt.Errorf("look up walrelay.emit: %w", err)
		return ch
	}
	prefix := dc.MessagePrefix
	if prefix == "" {
		prefix = "outbox"
	}
	ch.Note = fmt.Sprintf("pgoutput messages on: each pg_logical_emit_message(true, '%s', json) is an event; non-transactional ones are counted and never published", prefix)
	if emit {
		ch.Note += "; walrelay.emit exists"
	} else {
		ch.Warnings = append(ch.Warnings, "function walrelay.emit(aggregatetype, aggregateid, type, payload jsonb) does not exist: applications must write the JSON content themselves; `walrelay setup --source messages` creates it (--print shows its SQL)")
	}
	return ch
}
