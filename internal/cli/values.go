package cli

import (
	"errors"
	"flag"
	"math"
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

// DurationVar, BoolVar, SizeVar and Size64Var define a flag of fs with
// default def, as fs.DurationVar and the others do.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationFlag)(p), name, usage)
}

func BoolVar(fs *flag.FlagSet, p *bool, name string, def bool, usage string) {
	*p = def
	fs.Var((*boolFlag)(p), name, usage)
}

func SizeVar(fs *flag.FlagSet, p *int, name string, def int, usage string) {
	*p = def
	fs.Var((*sizeFlag)(p), name, usage)
}

func Size64Var(fs *flag.FlagSet, p *int64, name string, def int64, usage string) {
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
