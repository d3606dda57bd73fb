package debezium

import (
	"fmt"
	"io"
)

// Write prints r as the walrelay settings imported from file (connector
// name, "" when unnamed): a comment naming them, the notes as comments, then
// each setting shell-quoted, as a NAME=value line where env names a flag's
// environment variable or, with env nil, as a --flag=value line.
func (r Result) Write(w io.Writer, file, name string, env func(flag string) string) {
	fmt.Fprintf(w, "# walrelay settings imported from %s", file)
	if name != "" {
		fmt.Fprintf(w, " (connector %s)", name)
	}
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "# %s\n", n)
	}
	for _, s := range r.Settings {
		if env != nil {
			fmt.Fprintf(w, "%s=%s\n", env(s.Flag), ShellQuote(s.Value))
		} else {
			fmt.Fprintf(w, "--%s=%s\n", s.Flag, ShellQuote(s.Value))
		}
	}
}
