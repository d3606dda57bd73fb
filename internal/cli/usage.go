package cli

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// printDefaults is flag.PrintDefaults for fs (the same layout, which
// walrelay's test/compose parses), naming the kit's own flag types.
func printDefaults(fs *flag.FlagSet, w io.Writer) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		fmt.Fprintf(&b, "  -%s", f.Name)
		name, usage := flag.UnquoteUsage(f)
		if tn, ok := f.Value.(interface{ typeName() string }); ok {
			name = tn.typeName()
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			name = ""
		}
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZeroDefault(f) {
			if name == "string" {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
}

// isZeroDefault reports whether f's default is its type's zero value, which
// PrintDefaults does not show.
func isZeroDefault(f *flag.Flag) bool {
	typ := reflect.TypeOf(f.Value)
	if typ.Kind() != reflect.Pointer {
		return f.DefValue == ""
	}
	z, ok := reflect.New(typ.Elem()).Interface().(flag.Value)
	return ok && f.DefValue == z.String()
}

// PrintFlags prints "Flags:" and the flags of fs that show accepts (nil:
// all), in flag.PrintDefaults' layout.
func PrintFlags(w io.Writer, fs *flag.FlagSet, show func(name string) bool) {
	shown := fs
	if show != nil {
		shown = flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		fs.VisitAll(func(f *flag.Flag) {
			if show(f.Name) {
				shown.Var(f.Value, f.Name, f.Usage)
				shown.Lookup(f.Name).DefValue = f.DefValue
			}
		})
	}
	fmt.Fprintln(w, "\nFlags:")
	printDefaults(shown, w)
}

// Markdown renders the flags of fs as a Markdown table: each flag with its
// environment variable, default and meaning, in the order of
// flag.VisitAll.
func (k Kit) Markdown(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", f.Name, k.EnvName(f.Name), def, strings.ReplaceAll(f.Usage, "|", "\\|"))
	})
	return b.String()
}
