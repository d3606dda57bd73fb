package recovery

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// DefaultMargin is Options.Margin's default.
const DefaultMargin = 5 * time.Minute

// DefaultWindow is Options.Window's default: a week, long enough for a
// failover found on a Monday after a Friday night.
const DefaultWindow = 7 * 24 * time.Hour

// Options are the recovery settings a user gives (flags --recover-*,
// --backfill).
type Options struct {
	// Column is the timestamp column that selects the rows to recover and,
	// without track_commit_timestamp, orders them; pgcatalog.CommitTimeColumn
	// ("commit-time") is pg_xact_commit_timestamp(xmin). Default "":
	// commit-time when track_commit_timestamp is on.
	Column string
	// All recovers every row of the outbox, not only those since the
	// marker's commit time. Default false.
	All bool
	// Margin is taken off the marker's commit time before selecting by
	// Column: it must cover the longest transaction that writes the outbox
	// (a row's created_at is its transaction's start) and the clocks'
	// difference when the application sets Column. Default DefaultMargin.
	Margin time.Duration
	// Window is the longest time a slot may be gone, or walrelay stopped,
	// and its events still be recovered from the outbox table: the
	// outbox's retention must keep a row Window plus Margin after its
	// commit (Retention). walrelay check warns about a pg_partman
	// retention shorter than that; a recovery whose marker's commit time
	// is older than Window says rows may be gone. Default DefaultWindow.
	Window time.Duration
	// MissingSlot makes run recover as `walrelay recover` does when the
	// slot it streamed from is gone, instead of stopping (exit 3). Default
	// false.
	MissingSlot bool
	// Backfill makes run, when it creates its slot, first publish the rows
	// already in the outbox (Kind Backfill). Default false.
	Backfill bool
}

// RegisterFlags binds o to its flags.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Column, "recover-column", "", "timestamp column that selects the outbox rows walrelay recover (and --backfill) publish and, without track_commit_timestamp, orders them per aggregate, e.g. created_at; commit-time: pg_xact_commit_timestamp(xmin) (default: commit-time when track_commit_timestamp is on)")
	cli.BoolVar(fs, &o.All, "recover-all", false, "recover every row of the outbox, not only those since the slot marker's commit time minus --recover-margin")
	cli.DurationVar(fs, &o.Margin, "recover-margin", DefaultMargin, "taken off the slot marker's commit time when selecting rows by --recover-column: longer than the longest transaction writing the outbox plus the clock difference of whoever sets the column")
	cli.DurationVar(fs, &o.Window, "recovery-window", DefaultWindow, "the longest time the slot may be gone (or walrelay stopped) and its events still be recovered from the outbox table: keep outbox rows at least this plus --recover-margin; walrelay check warns about a shorter pg_partman retention, walrelay recover when the slot's last confirmed commit is older")
	cli.BoolVar(fs, &o.MissingSlot, "recover-missing-slot", false, "when the slot walrelay streamed from is gone (a failover without a synchronized slot), recover from the outbox table as walrelay recover does and go on streaming, instead of stopping with exit 3")
	cli.BoolVar(fs, &o.Backfill, "backfill", false, "when walrelay creates its slot, first publish the rows already in the outbox (chosen and ordered as --recover-column says), e.g. after a polling relay or a lost Debezium slot")
}

// Validate reports the options' mistakes.
func (o Options) Validate() error {
	var errs []error
	if o.Margin < 0 {
		errs = append(errs, fmt.Errorf("--recover-margin %s: want 0 or more (default %s)", o.Margin, DefaultMargin))
	}
	if o.Window <= 0 {
		errs = append(errs, fmt.Errorf("--recovery-window %s: want more than 0 (default %s)", o.Window, DefaultWindow))
	}
	return errors.Join(errs...)
}

// Retention is how long the outbox must keep a row after its commit for a
// recovery within Window: the recovery reads back to the marker's commit
// time minus Margin.
func (o Options) Retention() time.Duration { return o.Window + o.Margin }

// Kind says why rows are recovered.
type Kind string

// The kinds: the header walrelay.recovered carries it.
const (
	// Recover: the slot walrelay streamed from is gone.
	Recover Kind = "recover"
	// Backfill: walrelay's slot is new; the rows before it are published.
	Backfill Kind = "backfill"
)

// Config is what a recovery runs with: the relay's stages' settings.
type Config struct {
	Replication replication.Config
	Decode      decode.Config
	Sink        sink.Config
	// Marker is where the slot markers are kept; Brokers and Kafka
	// default to the sink's.
	Marker  kafkastate.Config
	Options Options
}

// commitTimeColumn is pgcatalog.CommitTimeColumn, the value of
// --recover-column that names commit time.
const commitTimeColumn = pgcatalog.CommitTimeColumn
