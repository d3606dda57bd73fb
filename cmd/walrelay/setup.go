package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/pipeline"
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
		if err := plan.AddEmit(c.pc.Decode); err != nil {
			fmt.Fprintf(stderr, "walrelay: %v\n", err)
			return exitConfig
		}
	}
	if *print {
		plan.Script(stdout, rc.SlotFailover != replication.FailoverOff)
		return exitOK
	}
	if *role != "" && password == "" {
		fmt.Fprintln(stderr, "walrelay: set WALRELAY_SETUP_ROLE_PASSWORD to the new role's password, or pass --role '' to skip creating a role")
		return exitConfig
	}
	if err := pipeline.LogTLSWarnings(c.pc.Replication, "", c.log); err != nil {
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", cli.Indent(err))
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
	// N.B. a slot walrelay streamed from is not created again: exit 3, as run.
	warning, err := pipeline.CheckSetupSlot(ctx, c.pc, conn, db)
	if warning != "" {
		fmt.Fprintf(stderr, "walrelay: warning: %s\n", warning)
	}
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		if gone := (*pgcatalog.SlotGoneError)(nil); errors.As(err, &gone) {
			return exitSlotLost
		}
		return exitRuntime
	}
	if err := plan.Apply(ctx, conn, stdout); err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitConfig
	}
	fmt.Fprintln(stdout, "\n"+pgcatalog.HBALine(*role, pgcatalog.HBADatabase(db)))
	return exitOK
}
