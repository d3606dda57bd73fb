package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/pipeline"
)

// setupCmd creates, or with --print prints, the SQL for a least-privilege
// role, the publication and the slot, and the pg_hba.conf line
// (pipeline.Setup).
func setupCmd(args []string, stdout, stderr io.Writer) int {
	var o pipeline.SetupOptions
	c, code := parseCommand("setup", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&o.Print, "print", false, "print the SQL instead of running it")
		fs.StringVar(&o.Role, "role", "walrelay", "least-privilege role to create for walrelay (empty: none); its password comes from WALRELAY_SETUP_ROLE_PASSWORD")
		fs.BoolVar(&o.Rotate, "rotate-password", false, "when the role exists, set its password to WALRELAY_SETUP_ROLE_PASSWORD (without it an existing role keeps its password)")
	}, func() bool { return o.Print })
	if code >= 0 {
		return code
	}
	o.Tables, o.Password, o.KafkaWarnings = cli.SplitList(c.cfg.Tables), os.Getenv("WALRELAY_SETUP_ROLE_PASSWORD"), c.cfg.securityWarnings
	err := pipeline.Setup(c.pc, o, stdout, c.log, func(w string) { fmt.Fprintf(stderr, "walrelay: warning: %s\n", w) })
	return commandExit(stderr, err, c.pc.Replication.ConnString)
}

// commandExit prints a sub-command's error and returns its exit code: 2 for
// a mistake a person must fix (a *pipeline.ConfigError as a list), 3 for a
// slot walrelay streamed from that is gone, a failed connection as
// connectFailed says, else 1.
func commandExit(stderr io.Writer, err error, connString string) int {
	var cfgErr *pipeline.ConfigError
	var connErr *pipeline.ConnectError
	var gone *pgcatalog.SlotGoneError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &cfgErr):
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", cli.Indent(cfgErr.Err))
		return exitConfig
	case errors.As(err, &connErr):
		return connectFailed(stderr, connErr.Err, connString)
	}
	fmt.Fprintf(stderr, "walrelay: %v\n", err)
	switch {
	case errors.As(err, &gone):
		return exitSlotLost
	case pipeline.IsSetupError(err):
		return exitConfig
	}
	return exitRuntime
}
