package main

import (
	"flag"
	"fmt"
	"strings"
)

// flagsMarkdown renders the configuration reference: every flag of
// `walrelay run` with its environment variable and default. The README
// embeds it between markers, and a test fails when the two drift.
func flagsMarkdown() string {
	var cfg config
	fs := newFlagSet("run", &cfg)
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", f.Name, envName(f.Name), def, strings.ReplaceAll(f.Usage, "|", "\\|"))
	})
	fmt.Fprintf(&b, "| — | `%s` | — | Kafka SASL password (never a flag) |\n", envName("kafka-sasl-password"))
	return b.String()
}
