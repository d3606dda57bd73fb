package cli

import "runtime/debug"

// BuildVersion is the version a program reports: stamped (set at build
// time with -ldflags "-X main.version=v1.2.3") when set, else the module
// version `go install ...@v1.2.3` or a build in a git checkout stamps
// (v0.0.0-DATE-COMMIT, +dirty with uncommitted changes), else
// "dev-COMMIT" ("-dirty" with uncommitted changes), else "dev".
func BuildVersion(stamped string) string {
	if stamped != "" {
		return stamped
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
