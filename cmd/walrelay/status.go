package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/walrelay/walrelay/fleet"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/pipeline"
)

// statusCmd prints the slot's state and lag. It exits 2 when the slot is
// missing and 3 when it is lost.
func statusCmd(args []string, stdout, stderr io.Writer) int {
	var top *flag.FlagSet
	c, code := parseCommand("status", args, stderr, func(fs *flag.FlagSet) { top = fs }, func() bool { return top.Lookup("config").Value.String() != "" })
	if code >= 0 {
		return code
	}
	if c.cfg.fleetFile != "" {
		return fleet.PrintStatus(c.cfg.fleetFile, top, pipelineFlags, stdout, stderr)
	}
	standbyURL := c.cfg.StandbyURL
	rc := c.pc.Replication
	if err := pipeline.LogTLSWarnings(c.pc.Replication, standbyURL, c.log); err != nil {
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", cli.Indent(err))
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgcatalog.OpenCommandConn(ctx, rc.ConnString)
	if err != nil {
		return connectFailed(stderr, err, rc.ConnString)
	}
	defer conn.Close()
	st, rows, err := conn.Status(ctx, rc.Slot, rc.Publication, standbyURL)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitRuntime
	}
	parked, perr := pipeline.ParkedStatus(context.Background(), c.pc, !c.cfg.NoKafka)
	for _, r := range append(rows, parked...) {
		fmt.Fprintf(stdout, "%-22s %s\n", r.Name, r.Value)
	}
	if perr != nil {
		fmt.Fprintf(stderr, "walrelay: warning: %v\n", perr)
	}
	if !st.Exists {
		fmt.Fprintf(stderr, "walrelay: replication slot %q does not exist: `walrelay setup` or `walrelay run --create` creates it\n", rc.Slot)
		return exitConfig
	}
	if st.WALStatus == "lost" {
		fmt.Fprintf(stderr, "walrelay: slot %q is lost: PostgreSQL removed WAL it still needed; events were lost (see docs/operate.md, \"Slot lost\")\n", rc.Slot)
		return exitSlotLost
	}
	return exitOK
}
