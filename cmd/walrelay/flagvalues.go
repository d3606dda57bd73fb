package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The flag values of walrelay's durations, switches and byte sizes: each
// parse error names the format it wants, with an example, because the flag
// package's own says only "parse error" (and the environment variable
// shows the same message: `WALRELAY_SHUTDOWN_TIMEOUT="30": want ...`).

// errDuration and the others are the messages; the flag package prefixes
// them with `invalid value "30" for flag -shutdown-timeout: `.
var (
	errDuration = errors.New("want a duration with a unit, e.g. 30s, 500ms or 2m (units: ms, s, m, h)")
	errBool     = errors.New("want true or false")
	errSize     = errors.New("want a number of bytes, e.g. 67108864, 64MiB or 100MB (suffixes B, KB, MB, GB, KiB, MiB, GiB)")
)

// durationVar, boolVar, sizeVar and size64Var define a flag of fs with
// default def, as fs.DurationVar and the others do.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationFlag)(p), name, usage)
}

func boolVar(fs *flag.FlagSet, p *bool, name string, def bool, usage string) {
	*p = def
	fs.Var((*boolFlag)(p), name, usage)
}

func sizeVar(fs *flag.FlagSet, p *int, name string, def int, usage string) {
	*p = def
	fs.Var((*sizeFlag)(p), name, usage)
}

func size64Var(fs *flag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var((*size64Flag)(p), name, usage)
}

// durationFlag is a time.Duration flag.
type durationFlag time.Duration

func (d *durationFlag) String() string   { return (*time.Duration)(d).String() }
func (d *durationFlag) typeName() string { return "duration" }
func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return errDuration
	}
	*d = durationFlag(v)
	return nil
}

// boolFlag is a bool flag: --name alone is true.
type boolFlag bool

func (b *boolFlag) String() string   { return strconv.FormatBool(bool(*b)) }
func (b *boolFlag) IsBoolFlag() bool { return true }
func (b *boolFlag) Set(s string) error {
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return errBool
	}
	*b = boolFlag(v)
	return nil
}

// sizeFlag is a byte count: a number, or one with a decimal (KB, MB, GB) or
// binary (KiB, MiB, GiB) suffix.
type sizeFlag int

func (z *sizeFlag) String() string   { return strconv.Itoa(int(*z)) }
func (z *sizeFlag) typeName() string { return "bytes" }
func (z *sizeFlag) Set(s string) error {
	v, err := parseSize(s)
	if err != nil || int64(int(v)) != v {
		return errSize
	}
	*z = sizeFlag(v)
	return nil
}

// size64Flag is a sizeFlag of int64.
type size64Flag int64

func (z *size64Flag) String() string   { return strconv.FormatInt(int64(*z), 10) }
func (z *size64Flag) typeName() string { return "bytes" }
func (z *size64Flag) Set(s string) error {
	v, err := parseSize(s)
	if err != nil {
		return errSize
	}
	*z = size64Flag(v)
	return nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// N.B. longest first, so that "MiB" is not read as "M" + "iB".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"b", 1},
}

// parseSize reads "67108864", "64MiB", "64 MiB" or "1MB" (suffixes in any
// case); a negative number stays negative, for the range checks to report.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(s)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(lower, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt64/mult || v < math.MinInt64/mult {
		return 0, errors.New("out of range")
	}
	return v * mult, nil
}

// printDefaults is flag.PrintDefaults for fs (the same layout, which
// test/compose parses), naming walrelay's own flag types.
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

// suggest returns the candidate closest to name (an edit distance of at
// most a third of its length, at least 1, or one that starts with name or
// the other way round), or "".
func suggest(name string, candidates []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		d := editDistance(name, c)
		if len(name) >= 3 && (strings.HasPrefix(c, name) || strings.HasPrefix(name, c)) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(1, len(name)/3) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
