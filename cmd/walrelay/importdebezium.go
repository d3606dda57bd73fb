package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/walrelay/walrelay/debezium"
)

// importDebeziumCmd is `walrelay import-debezium FILE`: it reads a Debezium
// PostgreSQL connector configuration (the JSON given to Kafka Connect's
// REST API, {"name":...,"config":{...}}, a flat JSON object, or a
// .properties file) and prints the walrelay settings that relay the same
// records, as WALRELAY_* lines (default) or flags. An option walrelay does
// not support is listed on stderr with exit 2 and nothing is printed:
// a partial configuration would relay other records. Secrets are never
// printed.
func importDebeziumCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import-debezium", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "env", "output: env (WALRELAY_*=value lines, shell-quoted) or flags (one --flag=value a line, shell-quoted)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: walrelay import-debezium [--format env|flags] FILE\n\nPrints the walrelay settings equivalent to a Debezium PostgreSQL connector with the Outbox Event Router\n(Connect REST JSON, flat JSON or .properties). Unsupported options are listed, exit 2.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// N.B. flags may follow the file name too.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitConfig
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "walrelay import-debezium: want one connector configuration file, got %d\n", len(files))
		return exitConfig
	}
	if *format != "env" && *format != "flags" {
		fmt.Fprintf(stderr, "walrelay import-debezium: --format %q: want env or flags\n", *format)
		return exitConfig
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "walrelay import-debezium: %v\n", err)
		return exitConfig
	}
	props, name, err := debezium.ParseConnectorConfig(files[0], b)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay import-debezium: read %s: %v\n", files[0], err)
		return exitConfig
	}
	imp := debezium.Import(props)
	if len(imp.Unsupported) > 0 {
		fmt.Fprintf(stderr, "walrelay import-debezium: %s: %d option(s) walrelay does not support; nothing printed:\n", files[0], len(imp.Unsupported))
		for _, u := range imp.Unsupported {
			fmt.Fprintf(stderr, "  - %s\n", u)
		}
		return exitConfig
	}
	var env func(string) string
	if *format == "env" {
		env = envName
	}
	imp.Write(stdout, files[0], name, env)
	return exitOK
}
