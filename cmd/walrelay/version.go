package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3"
// (make build and the Dockerfile do). Empty: buildVersion reads what the
// Go toolchain stamped.
var version string

// buildVersion is the version walrelay reports: the one set at build time,
// else the module version `go install ...@v1.2.3` or a build in a git
// checkout stamps (v0.0.0-DATE-COMMIT, +dirty with uncommitted changes),
// else the commit alone, else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "dev-" + rev
}

func versionCmd(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "walrelay", buildVersion())
	return exitOK
}
