package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pipeline"
	"github.com/walrelay/walrelay/replication"
)

// checkCmd runs every preflight check against PostgreSQL and Kafka without
// streaming or creating anything (pipeline.Check), and prints one line per
// check. A check that depends on a failed one says it was skipped.
func checkCmd(args []string, stdout, stderr io.Writer) int {
	o := pipeline.CheckOptions{}
	c, code := parseCommand("check", args, stderr, nil, nil)
	if code >= 0 {
		return code
	}
	o.StandbyURL = c.cfg.StandbyURL
	if o.StandbyURL != "" {
		var err error
		if _, o.StandbyWarnings, err = replication.TLSPolicy("--pg-standby-url", o.StandbyURL, c.cfg.Replication.RequireVerifiedTLS); err != nil {
			fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", cli.Indent(err))
			return exitConfig
		}
	}
	o.KafkaWarnings = c.cfg.securityWarnings
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results := pipeline.Check(ctx, c.pc, o)
	nFailed, nSkipped, nWarned := 0, 0, 0
	for _, r := range results {
		switch {
		case r.Skipped != "":
			nSkipped++
			fmt.Fprintf(stdout, "SKIP  %s: not checked, because %q failed\n", r.Name, r.Skipped)
		case r.Err != nil:
			nFailed++
			fmt.Fprintf(stdout, "FAIL  %s: %v\n", r.Name, r.Err)
		case r.Note != "":
			fmt.Fprintf(stdout, "PASS  %s: %s\n", r.Name, r.Note)
		default:
			fmt.Fprintf(stdout, "PASS  %s\n", r.Name)
		}
		for _, w := range r.Warnings {
			nWarned++
			fmt.Fprintf(stdout, "WARN  %s: %s\n", r.Name, w)
		}
	}
	extra := ""
	if nSkipped > 0 {
		extra = fmt.Sprintf(", %d skipped", nSkipped)
	}
	if nWarned > 0 {
		extra += fmt.Sprintf(", %d warning(s): see the WARN lines", nWarned)
	}
	if nFailed > 0 {
		fmt.Fprintf(stdout, "%d of %d checks failed%s\n", nFailed, len(results), extra)
		return exitConfig
	}
	fmt.Fprintf(stdout, "all %d checks passed%s\n", len(results), extra)
	return exitOK
}
