package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/walrelay/walrelay/internal/httpserve"
)

// healthCmd probes a running walrelay's HTTP endpoint; for container
// health checks in images without a shell.
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080/readyz", "endpoint to probe (default: /readyz on "+envName("http-addr")+"'s port when it is set)")
	if err := kit.Parse(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitConfig
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "url" })
	// N.B. the address run serves on, from the same variable, so that a
	// container's health check follows WALRELAY_HTTP_ADDR.
	if addr, ok := os.LookupEnv(envName("http-addr")); ok && !given {
		if addr == "" {
			fmt.Fprintf(stderr, "walrelay health: %s is empty, so walrelay serves no endpoint to probe: set it, or pass --url\n", envName("http-addr"))
			return exitConfig
		}
		u, err := httpserve.ReadyURL(addr)
		if err != nil {
			fmt.Fprintf(stderr, "walrelay health: %s=%q: want host:port or :port: %v\n", envName("http-addr"), addr, err)
			return exitConfig
		}
		*url = u
	}
	line, ok, err := httpserve.Probe(*url)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay health: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintln(stdout, line)
	if !ok {
		return exitRuntime
	}
	return exitOK
}
