package main

import (
	"fmt"
	"io"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

func versionCmd(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "walrelay", version)
	return exitOK
}
