package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// setupCmd creates, or with --print prints, the SQL for a least-privilege
// role, the publication and the slot, and the pg_hba.conf line.
func setupCmd(args []string, stdout, stderr io.Writer) int {
	var print *bool
	var role *string
	var rotate *bool
	c, code := parseCommand("setup", args, stderr, func(fs *flag.FlagSet) {
		print = fs.Bool("print", false, "print the SQL instead of running it")
		role = fs.String("role", "walrelay", "least-privilege role to create for walrelay (empty: none); its password comes from WALRELAY_SETUP_ROLE_PASSWORD")
		rotate = fs.Bool("rotate-password", false, "when the role exists, set its password to WALRELAY_SETUP_ROLE_PASSWORD (without it an existing role keeps its password)")
	}, func() bool { return *print })
	if code >= 0 {
		return code
	}
	cfg, rc := c.cfg, c.pc.Replication
	tables := cli.SplitList(cfg.Tables)
	// N.B. the names are checked on every path, --print included (which
	// tolerates a missing --pg-url): each is written into SQL, the
	// replication protocol or pg_hba.conf.
	if err := pgcatalog.SetupNames(cfg.Replication.Slot, cfg.Replication.Publication, *role, tables); err != nil {
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", cli.Indent(err))
		return exitConfig
	}
	if rc.NoTables {
		tables = nil // the message source alone: an empty publication
	}
	password := os.Getenv("WALRELAY_SETUP_ROLE_PASSWORD")
	plan, err := pgcatalog.PlanSetup(*role, password, *rotate, cfg.Replication.Publication, cfg.Replication.Slot, tables)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitRuntime
	}
	if rc.Messages {
		emit, err := pgcatalog.EmitSQL(c.pc.Decode)
		if err != nil {
			fmt.Fprintf(stderr, "walrelay: %v\n", err)
			return exitConfig
		}
		plan.AddSQL(emit...)
	}
	if *print {
		plan.Script(stdout, rc.SlotFailover != replication.FailoverOff)
		return exitOK
	}
	if *role != "" && password == "" {
		fmt.Fprintln(stderr, "walrelay: set WALRELAY_SETUP_ROLE_PASSWORD to the new role's password, or pass --role '' to skip creating a role")
		return exitConfig
	}
	if !pgTLSWarnings(c, "", stderr) {
		return exitConfig
	}
	for _, w := range cfg.securityWarnings {
		c.log.Warn(w) // setup reads the slot markers from Kafka
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgcatalog.OpenCommandConn(ctx, rc.ConnString)
	if err != nil {
		return connectFailed(stderr, err, rc.ConnString)
	}
	defer conn.Close()
	db, err := conn.Database(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitRuntime
	}
	// N.B. a failover slot on 17+ unless --slot-failover=false, as run
	// creates it.
	version, err := conn.ServerVersion(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitRuntime
	}
	if version >= 170000 && rc.SlotFailover != replication.FailoverOff {
		plan.FailoverSlot()
	}
	if code := setupSlotGone(ctx, c, conn, db, stderr); code >= 0 {
		return code
	}
	if err := plan.Apply(ctx, conn, stdout); err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitConfig
	}
	fmt.Fprintln(stdout, "\n"+pgcatalog.HBALine(*role, pgcatalog.HBADatabase(db)))
	return exitOK
}

// setupSlotGone refuses to create a slot walrelay streamed from (its marker
// is on --checkpoint-topic, pgcatalog.CheckSlotGone) unless
// --recreate-missing-slot: exit 3, as run. It returns -1 to go on.
func setupSlotGone(ctx context.Context, c *command, conn *pgcatalog.CommandConn, db string, stderr io.Writer) int {
	if exists, err := conn.SlotExists(ctx, c.cfg.Replication.Slot); err != nil || exists || c.pc.Replication.RecreateMissingSlot {
		return -1
	}
	mc := c.pc.Marker
	mc.CreateTopic = false
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ms, err := kafkastate.Open(kctx, mc, zap.NewNop())
	if errors.Is(err, kafkastate.ErrSetup) {
		return -1 // no compacted marker topic: no marker
	}
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: warning: cannot read the slot markers on %s (%v): if walrelay streamed from slot %q before, creating it again skips the events committed since\n", c.cfg.Sink.CheckpointTopic, err, c.cfg.Replication.Slot)
		return -1
	}
	defer ms.Close()
	err = pgcatalog.CheckSlotGone(ctx, c.pc.Replication, db, ms)
	if gone := (*pgcatalog.SlotGoneError)(nil); errors.As(err, &gone) {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitSlotLost
	}
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitRuntime
	}
	return -1
}
