package pipeline

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/preflight"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/sink"
)

// CheckResult is one line of `walrelay check`: a check's outcome, or why it
// was skipped.
type CheckResult struct {
	preflight.Check
	// Skipped names the failed check this one depends on ("": it ran).
	Skipped string
}

// CheckOptions are what `walrelay check` adds to the relay's configuration.
type CheckOptions struct {
	// StandbyURL is a physical standby to check for the slot ("": none),
	// with StandbyWarnings about its connection.
	StandbyURL      string
	StandbyWarnings []string
	// KafkaWarnings are about what the Kafka settings leave unprotected,
	// reported on the first Kafka check.
	KafkaWarnings []string
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

// Check runs every preflight check of cfg against PostgreSQL and Kafka
// without streaming or creating anything, in the order `walrelay check`
// prints them. A check that depends on a failed one is skipped.
func Check(ctx context.Context, cfg Config, o CheckOptions) []CheckResult {
	rc, dc, sc := cfg.Replication, cfg.Decode, cfg.Sink
	// N.B. the slot markers are read (never written) so that check says
	// when run would stop on a slot that is gone.
	mc := cfg.Marker
	mc.CreateTopic = false
	if ms, err := kafkastate.Open(ctx, mc, zap.NewNop()); err == nil {
		defer ms.Close()
		rc.History = ms
	}
	var results []CheckResult
	failed := map[string]bool{}
	for _, ch := range pgcatalog.Preflight(ctx, rc, zap.NewNop()) {
		if hint, ok := RefusalHint(ch.Err, rc.ConnString); ok {
			ch.Err = fmt.Errorf("%w: %s", ch.Err, hint)
		}
		r := CheckResult{Check: ch, Skipped: skippedFor(ch.Name, failed)}
		if r.Skipped != "" {
			r.Check = preflight.Check{Name: ch.Name}
		}
		results = append(results, r)
		if ch.Err != nil || r.Skipped != "" {
			failed[ch.Name] = true
		}
	}
	// N.B. a slot that exists (Debezium's, or walrelay's own): what it is
	// and that run streams from it.
	if !failed["replication slot"] && !failed["publication"] {
		if ch, ok := pgcatalog.Takeover(ctx, rc); ok {
			results = append(results, CheckResult{Check: ch})
		}
	}
	columns := CheckResult{Check: preflight.Check{Name: "outbox columns"}, Skipped: skippedFor("outbox columns", failed)}
	if columns.Skipped == "" {
		_, columns.Err = CheckColumns(ctx, rc.ConnString, rc.Publication, dc)
		columns.Note = "every mapped and template column exists, has a type its flag takes and is sent by pgoutput"
		if dc.NoTables {
			columns.Note = "none: --source messages reads each event's fields from its message's JSON content"
		}
	}
	results = append(results, columns)
	if rc.Messages && !failed["connect to PostgreSQL"] {
		results = append(results, CheckResult{Check: pgcatalog.MessagesCheck(ctx, rc.ConnString, dc)})
	}
	if !failed["connect to PostgreSQL"] && !dc.NoTables {
		if ch, ok := pgcatalog.PartmanCheck(ctx, rc.ConnString, rc.Tables, cfg.Recovery.Window, cfg.Recovery.Margin); ok {
			results = append(results, CheckResult{Check: ch})
		}
	}
	if o.StandbyURL != "" {
		ch := pgcatalog.StandbyCheck(ctx, rc.ConnString, rc.Slot, o.StandbyURL)
		ch.Warnings = append(ch.Warnings, o.StandbyWarnings...)
		results = append(results, CheckResult{Check: ch})
	}
	probes := []sink.Probe{kafkastate.Preflight(mc.Topic, sc.CreateTopics)}
	if sc.OnPoison == sink.OnPoisonPark {
		probes = append(probes, kafkastate.PreflightParked(sc.CheckpointTopic, sc.Brokers, sc.Kafka))
	}
	for i, ch := range sink.Preflight(ctx, sc, probes...) {
		if i == 0 {
			// N.B. check reports warnings as WARN lines, as Preflight's.
			ch.Warnings = append(ch.Warnings, o.KafkaWarnings...)
		}
		if hint, ok := RefusalHint(ch.Err, rc.ConnString); ok {
			ch.Err = fmt.Errorf("%w: %s", ch.Err, hint)
		}
		results = append(results, CheckResult{Check: ch})
	}
	if sc.ExactlyOnce {
		for _, ch := range sink.PreflightExactlyOnce(ctx, sc.WithSlot(rc.Slot)) {
			results = append(results, CheckResult{Check: ch})
		}
	}
	return results
}
