package main

import (
	"fmt"
	"io"
	"os"

	"github.com/walrelay/walrelay/dlq"
	"github.com/walrelay/walrelay/internal/cli"
)

// Exit codes (doc.go).
const (
	exitOK       = 0
	exitRuntime  = 1 // a failure while running
	exitConfig   = 2 // bad flags, or a PostgreSQL/Kafka setup a person must fix
	exitSlotLost = 3 // the slot was invalidated, or is gone: events may have been lost
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// commands are the sub-commands, in the order usage lists them.
var commands = []struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}{
	{"run", "stream outbox inserts to Kafka (the default)", func(args []string, _, stderr io.Writer) int { return runCmd(args, stderr) }},
	{"check", "check PostgreSQL and Kafka for everything run needs, without streaming", checkCmd},
	{"status", "show the slot: active, confirmed position, lag, wal_status (--config: each pipeline of a running fleet)", statusCmd},
	{"recover", "after the slot is gone (exit 3): publish the outbox rows it missed, then create it again", recoverCmd},
	{"setup", "create (or --print) the role, publication and slot walrelay needs", setupCmd},
	{"import-debezium", "print the settings equivalent to a Debezium connector configuration", importDebeziumCmd},
	{"health", "probe a running walrelay's /readyz (for container health checks)", healthCmd},
	{"dlq", "list, show, redrive or discard dead letters and parked aggregates (docs/dlq.md)", dlq.Main},
	{"version", "print the version", versionCmd},
	{"help", "print this text", nil}, // realMain: helpCmd would refer to commands
}

func realMain(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-h" || a == "-help" || a == "--help" || a == "help":
			// N.B. the top-level help lists the sub-commands; `walrelay run
			// -h` lists run's flags.
			return helpCmd(nil, stdout, stderr)
		case a == "--version" || a == "-version":
			return versionCmd(nil, stdout, stderr)
		case len(a) > 0 && a[0] != '-':
			cmd, args = a, args[1:]
		}
	}
	for _, c := range commands {
		if c.name == cmd && c.run != nil {
			return c.run(args, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "walrelay: unknown command %q\n\n%s", cmd, usage())
	return exitConfig
}

// usage lists the sub-commands, one line each.
func usage() string {
	s := "Usage: walrelay [command] [flags]\n\nCommands:\n"
	for _, c := range commands {
		s += fmt.Sprintf("  %-8s %s\n", c.name, c.summary)
	}
	return s + "\nRun 'walrelay <command> -h' for a command's flags; 'walrelay run -h' lists the relay's, each with its WALRELAY_* variable.\n"
}

func helpCmd(_ []string, stdout, _ io.Writer) int {
	fmt.Fprint(stdout, usage())
	return exitOK
}

// version is set at build time: go build -ldflags "-X main.version=v1.2.3"
// (make build and the Dockerfile do). Empty: cli.BuildVersion reads what
// the Go toolchain stamped.
var version string

func versionCmd(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "walrelay", cli.BuildVersion(version))
	return exitOK
}
