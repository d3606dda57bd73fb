package main

import (
	"fmt"
	"io"

	"github.com/walrelay/walrelay/internal/cli"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3"
// (make build and the Dockerfile do). Empty: cli.BuildVersion reads what
// the Go toolchain stamped.
var version string

func versionCmd(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "walrelay", cli.BuildVersion(version))
	return exitOK
}
