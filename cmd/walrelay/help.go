package main

import (
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/walrelay/walrelay/internal/cli"
)

// listedFlags names the run flags each sub-command other than run uses,
// which its help lists (with the command's own flags). Each takes every
// flag of run and its WALRELAY_* variable too, ignoring those it does not
// use, so that one command line or environment serves every command.
var listedFlags = map[string][]string{
	"check": {"pg-url", "pg-url-file", "publication", "slot", "table", "create", "status-interval",
		"id-column", "key-column", "payload-column", "header-columns", "topic", "brokers", "create-topics", "on-poison", "dlq-topic",
		"kafka-tls", "kafka-tls-ca-file", "kafka-tls-cert-file", "kafka-tls-key-file", "kafka-tls-server-name",
		"kafka-sasl-mechanism", "kafka-sasl-username", "kafka-sasl-password-file", "kafka-allow-sasl-plain-without-tls", "pg-require-verified-tls",
		"source", "message-prefix", "pg-standby-url"},
	"status": {"pg-url", "pg-url-file", "slot", "publication", "pg-require-verified-tls", "pg-standby-url"},
	"setup":  {"pg-url", "pg-url-file", "publication", "slot", "table", "pg-require-verified-tls", "source", "message-prefix"},
}

// runFlagNames are the names of run's flags.
func runFlagNames() []string {
	var names []string
	newFlagSet("run", &config{}).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// printUsage prints fs's help: for a command of listedFlags the flags it
// uses and its own.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: walrelay %s [flags]\n\nEvery flag can also be set through its environment variable, e.g. --pg-url as %s.\n'walrelay help' lists the other commands.\n", fs.Name(), envName("pg-url"))
	var show func(string) bool
	if listed, ok := listedFlags[fs.Name()]; ok {
		fmt.Fprintf(w, "%s also takes the other flags of run (see 'walrelay run -h') and ignores them, so that run's command line and environment serve it as they are.\n", fs.Name())
		run := runFlagNames()
		show = func(name string) bool { return slices.Contains(listed, name) || !slices.Contains(run, name) }
	}
	cli.PrintFlags(w, fs, show)
}

// otherEnv are the WALRELAY_* variables that are no flag of run: the other
// commands' own flags and the passwords.
var otherEnv = []string{envName("kafka-sasl-password"), "WALRELAY_SETUP_ROLE_PASSWORD", envName("print"), envName("role"), envName("rotate-password"), envName("url"),
	envName("format")}

// envWarnings names each WALRELAY_* variable in the environment that is no
// walrelay setting (and so is ignored), with the closest one that is.
//
// N.B. WALRELAY_TEST_*, _CHAOS and _EXPLORE_* are the test bed's, make
// chaos's and make explore's (docs/development.md), never walrelay's.
func envWarnings() []string {
	var known []string
	for _, n := range runFlagNames() {
		known = append(known, envName(n))
	}
	return kit.UnknownEnv(append(known, otherEnv...), envPrefix+"TEST_", envPrefix+"CHAOS", envPrefix+"EXPLORE_")
}
