package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kit is a program's flag conventions: its name in messages, the prefix of
// its environment variables, and its commands' help.
type Kit struct {
	// Program is the program's name, in messages ('walrelay run -h').
	Program string
	// EnvPrefix begins every flag's environment variable: with
	// "WALRELAY_", --pg-url is WALRELAY_PG_URL.
	EnvPrefix string
	// Usage prints a command's help (-h); nil: PrintFlags of every flag.
	Usage func(fs *flag.FlagSet, w io.Writer)
}

// EnvName is the environment variable of flag flagName: EnvPrefix + the
// name in upper case with '-' as '_'.
func (k Kit) EnvName(flagName string) string { return EnvName(k.EnvPrefix, flagName) }

// EnvName is prefix + flagName in upper case with '-' as '_'.
func EnvName(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args, then fills every flag not given on the command
// line from its environment variable. -h prints the help to stderr and
// returns flag.ErrHelp.
func (k Kit) Parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	// N.B. the flag package prints its error and the whole usage on any
	// mistake; Parse returns one line that says what to do instead.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := k.checkArgs(fs, args); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if k.Usage != nil {
				k.Usage(fs, stderr)
			} else {
				PrintFlags(stderr, fs, nil)
			}
		}
		return err
	}
	if fs.NArg() > 0 {
		if i := len(args) - fs.NArg(); i > 0 {
			if f := argFlag(fs, args[i-1]); f != nil && isSwitch(f) && !strings.Contains(args[i-1], "=") {
				if _, err := strconv.ParseBool(fs.Arg(0)); err == nil {
					return fmt.Errorf("unexpected argument %q after %s: a switch takes its value after '=': --%s=%s", fs.Arg(0), args[i-1], f.Name, fs.Arg(0))
				}
			}
		}
		return fmt.Errorf("unexpected argument %q: flags start with --", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, name := range names {
		if given[name] {
			continue
		}
		if v, ok := os.LookupEnv(k.EnvName(name)); ok {
			if err := fs.Set(name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", k.EnvName(name), v, err))
			}
		}
	}
	return errors.Join(errs...)
}

// argFlag is the flag of fs that argument a ("-name", "--name" or
// "--name=value") names, or nil.
func argFlag(fs *flag.FlagSet, a string) *flag.Flag {
	if len(a) < 2 || a[0] != '-' {
		return nil
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
	return fs.Lookup(name)
}

func isSwitch(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// checkArgs walks the flags of args as fs.Parse will and reports the first
// one fs does not have, with the closest one it has.
func (k Kit) checkArgs(fs *flag.FlagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			return nil
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if name == "h" || name == "help" || name == "" || name[0] == '-' || name[0] == '=' {
			return nil // fs.Parse handles these
		}
		f := fs.Lookup(name)
		if f == nil {
			return k.unknownFlag(fs, name)
		}
		if !isSwitch(f) && !hasValue {
			i++ // the flag's value
		}
	}
	return nil
}

func (k Kit) unknownFlag(fs *flag.FlagSet, name string) error {
	help := fmt.Sprintf("'%s %s -h' lists its flags", k.Program, fs.Name())
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := Suggest(name, names); s != "" {
		return fmt.Errorf("unknown flag --%s: did you mean --%s? (%s)", name, s, help)
	}
	return fmt.Errorf("unknown flag --%s (%s)", name, help)
}

// UnknownEnv names each variable of the environment that begins with
// EnvPrefix but is none of known (and begins with none of ignore), and so
// is ignored, with the closest one that is known.
func (k Kit) UnknownEnv(known []string, ignore ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, k.EnvPrefix) || slices.Contains(known, name) ||
			slices.ContainsFunc(ignore, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		w := name + " is set but is no " + k.Program + " setting: ignored"
		if s := Suggest(name, known); s != "" {
			w += "; did you mean " + s + "?"
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// SplitList splits a comma-separated list, trimming blanks and dropping
// empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Indent writes each line of err as an item of a list ("  - line\n").
func Indent(err error) string {
	out := ""
	for _, line := range strings.Split(err.Error(), "\n") {
		out += "  - " + line + "\n"
	}
	return out
}
