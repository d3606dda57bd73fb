package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// healthCmd probes a running walrelay's HTTP endpoint; for container
// health checks in images without a shell.
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080/readyz", "endpoint to probe")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConfig
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(*url)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay health: %v\n", err)
		return exitRuntime
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(stdout, "%s %s", resp.Status, strings.TrimSpace(string(body))+"\n")
	if resp.StatusCode != http.StatusOK {
		return exitRuntime
	}
	return exitOK
}
