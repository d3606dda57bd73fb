package fleet

import (
	"cmp"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pipeline"
)

// ProcessWide are the flags set once for the whole process, at the top of
// the file (or on the command line, which wins): the HTTP endpoints, the
// log, and Kafka's brokers and security, which every pipeline shares.
// Every other flag of `walrelay run` is a pipeline's, set under defaults:
// or under the pipeline.
var ProcessWide = []string{
	"http-addr", "http-idle-timeout", "http-max-connections", "http-pprof", "log-level", "log-format",
	"brokers", "kafka-tls", "kafka-tls-ca-file", "kafka-tls-cert-file", "kafka-tls-key-file", "kafka-tls-server-name",
	"kafka-sasl-mechanism", "kafka-sasl-username", "kafka-sasl-password-file", "kafka-allow-sasl-plain-without-tls",
	"fleet-instance",
	// N.B. the bench build's CPU profile of the whole process (make bench);
	// the product has no such flag, so the file cannot set it there.
	"cpu-profile",
}

// configFlag is --config itself, which the file cannot set.
const configFlag = "config"

// envPrefix begins the environment variable of each flag (cmd/walrelay).
const envPrefix = "WALRELAY_"

// NewPipeline makes a fresh flag set of `walrelay run`, bound to one
// pipeline's settings, and the function that turns those settings into
// the relay's configuration, with the warnings about what the Kafka
// settings leave unprotected, reporting every mistake at once.
type NewPipeline func() (*flag.FlagSet, func() (pipeline.Config, []string, error))

// plan is one pipeline of the file, ready to run.
type plan struct {
	name     string
	line     int
	cfg      pipeline.Config
	warnings []string
}

// loader checks a file against the flags.
type loader struct {
	f    file
	top  *flag.FlagSet
	make NewPipeline
	ms   []mistake
}

// load reads the file's settings into one configuration per pipeline:
// the process-wide settings onto top (unless given on the command line),
// then each pipeline's flag set from the process-wide settings, the
// defaults and its own, each value parsed and validated by its flag. It
// returns every mistake, with its line.
func load(data []byte, top *flag.FlagSet, newPipeline NewPipeline) ([]plan, []mistake) {
	f, ms := parseFile(data)
	l := &loader{f: f, top: top, make: newPipeline, ms: ms}
	scratch, _ := newPipeline()
	given := map[string]bool{}
	top.Visit(func(fl *flag.Flag) {
		given[fl.Name] = true
		if fl.Name != configFlag && !isProcessWide(fl.Name) {
			l.add(mistake{msg: fmt.Sprintf("--%s is given with --config (on the command line or as %s): set %s: under defaults: or under a pipeline in the file instead",
				fl.Name, cli.EnvName(envPrefix, fl.Name), fl.Name)})
		}
	})
	for _, e := range f.top.entries {
		switch {
		case isProcessWide(e.key):
			if !given[e.key] {
				l.set(top, e, "")
			}
		case e.key == keyGroup:
			if !groupPattern.MatchString(e.value) {
				l.add(mistake{line: e.line, msg: fmt.Sprintf("group: %q: want a name of letters, digits, '.', '_' or '-' (it names the topic %s)", e.value, coordinationTopic("NAME"))})
			}
		case e.key == keyGroupSession:
			if _, m := groupSession(f); m != nil {
				l.add(*m)
			}
		case e.key == keyName:
			l.add(mistake{line: e.line, msg: "name: belongs to a pipeline: under pipelines:, e.g. - name: orders"})
		case e.key == inflightKey: // the process's, checked by processInflight (budget.go)
		case e.key != configFlag && scratch.Lookup(e.key) != nil:
			l.add(mistake{line: e.line, msg: e.key + ": is a pipeline's setting: put it under defaults: (every pipeline) or under a pipeline"})
		default:
			l.unknown(scratch, e, "")
		}
	}
	for _, e := range f.defaults.entries {
		l.pipelineEntry(scratch, e, "")
	}
	var plans []plan
	for _, p := range f.pipelines {
		fs, build := newPipeline()
		for _, name := range ProcessWide {
			if v := top.Lookup(name); v != nil && fs.Lookup(name) != nil {
				// N.B. set: what top holds was parsed by the same flag.
				fs.Set(name, v.Value.String())
			}
		}
		for _, e := range f.defaults.entries {
			// N.B. the defaults' mistakes are reported once, above.
			if fl := fs.Lookup(e.key); fl != nil && !isProcessWide(e.key) && e.key != configFlag {
				fs.Set(e.key, e.value)
			}
		}
		for _, e := range p.entries {
			if e.key != keyName {
				l.pipelineEntry(fs, e, p.name)
			}
		}
		cfg, warnings, err := build()
		if err != nil {
			for _, msg := range strings.Split(err.Error(), "\n") {
				l.add(l.attribute(p, msg))
			}
		}
		// N.B. a pipeline with mistakes is still compared with the others,
		// so that every mistake shows at once.
		plans = append(plans, plan{name: p.name, line: p.line, cfg: cfg, warnings: warnings})
	}
	l.duplicates(plans)
	slices.SortStableFunc(l.ms, func(a, b mistake) int { return cmp.Compare(a.line, b.line) })
	return plans, l.ms
}

// pipelineEntry sets e, a setting under defaults: or a pipeline, on fs.
func (l *loader) pipelineEntry(fs *flag.FlagSet, e entry, pipeline string) {
	switch {
	case isProcessWide(e.key):
		l.add(mistake{line: e.line, pipeline: pipeline, msg: e.key + ": is process-wide (every pipeline shares it): set it at the top of the file"})
	case e.key == configFlag || fs.Lookup(e.key) == nil:
		l.unknown(fs, e, pipeline)
	default:
		l.set(fs, e, pipeline)
	}
}

// set sets flag e.key of fs to e.value.
func (l *loader) set(fs *flag.FlagSet, e entry, pipeline string) {
	if err := fs.Set(e.key, e.value); err != nil {
		l.add(mistake{line: e.line, pipeline: pipeline, msg: fmt.Sprintf("%s: %q: %v", e.key, e.value, err)})
	}
}

// unknown reports e, which names no flag, with the closest one.
func (l *loader) unknown(fs *flag.FlagSet, e entry, pipeline string) {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	names = append(names, keyDefaults, keyPipelines, keyName)
	msg := e.key + ": no such setting ('walrelay run -h' lists them: each is a flag's name without --)"
	if s := cli.Suggest(e.key, names); s != "" {
		msg = fmt.Sprintf("%s: no such setting: did you mean %s? ('walrelay run -h' lists them)", e.key, s)
	}
	if e.key == configFlag {
		msg = "config: the file cannot name another file"
	}
	l.add(mistake{line: e.line, pipeline: pipeline, msg: msg})
}

// add records m once.
func (l *loader) add(m mistake) {
	if !slices.Contains(l.ms, m) {
		l.ms = append(l.ms, m)
	}
}

// flagRef finds the flags a validation message names ("--slot ...", or
// "on-poison ..." at its start).
var flagRef = regexp.MustCompile(`(?:^|--)([a-z][a-z0-9-]*)`)

// attribute places a validation message of pipeline p at the line of the
// first setting it names: the pipeline's own, else the defaults', else the
// top's (a process-wide one, shared: reported once, without a pipeline);
// a message that names none is at the pipeline's first line.
func (l *loader) attribute(p section, msg string) mistake {
	for _, m := range flagRef.FindAllStringSubmatch(msg, -1) {
		name := m[1]
		if isProcessWide(name) {
			e, _ := l.f.top.lookup(name)
			return mistake{line: e.line, msg: msg}
		}
		if e, ok := p.lookup(name); ok {
			return mistake{line: e.line, pipeline: p.name, msg: msg}
		}
		if e, ok := l.f.defaults.lookup(name); ok {
			return mistake{line: e.line, pipeline: p.name, msg: msg}
		}
	}
	return mistake{line: p.line, pipeline: p.name, msg: msg}
}

// duplicates reports two pipelines on one slot of one database, and two
// exactly-once pipelines with one transactional id (each would fence the
// other).
func (l *loader) duplicates(plans []plan) {
	slots := map[string]plan{}
	txids := map[string]plan{}
	for _, p := range plans {
		rc := p.cfg.Replication
		db, ok := database(rc.ConnString)
		key := db + "\x00" + rc.Slot
		if q, dup := slots[key]; ok && dup {
			l.add(mistake{line: l.lineOf(p, "slot"), pipeline: p.name, msg: fmt.Sprintf("slot %q of %s is also pipeline %q's (line %d): give each pipeline of one database a slot of its own", rc.Slot, db, q.name, q.line)})
		} else {
			slots[key] = p
		}
		if !p.cfg.Sink.ExactlyOnce {
			continue
		}
		id := p.cfg.Sink.WithSlot(rc.Slot).TransactionalID
		if q, dup := txids[id]; dup {
			l.add(mistake{line: l.lineOf(p, "transactional-id"), pipeline: p.name, msg: fmt.Sprintf("--exactly-once with transactional id %q, which is also pipeline %q's (line %d): each would fence the other; set transactional-id: per pipeline", id, q.name, q.line)})
		} else {
			txids[id] = p
		}
	}
}

// lineOf is the line of setting key of p: its own, else the defaults',
// else p's first line.
func (l *loader) lineOf(p plan, key string) int {
	for _, s := range l.f.pipelines {
		if s.name == p.name {
			if e, ok := s.lookup(key); ok {
				return e.line
			}
		}
	}
	if e, ok := l.f.defaults.lookup(key); ok {
		return e.line
	}
	return p.line
}

// database names the database a connection string reaches (host, port,
// database), for telling two pipelines' slots apart; false when it does
// not parse (the pipeline's validation says so).
func database(connString string) (string, bool) {
	c, err := pgconn.ParseConfig(connString)
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("database %q on %s:%d", c.Database, c.Host, c.Port), true
}

func isProcessWide(name string) bool { return slices.Contains(ProcessWide, name) }

// format writes the mistakes, one a line: FILE:LINE: pipeline "NAME": ...
func format(path string, ms []mistake) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString("  - " + path)
		if m.line > 0 {
			fmt.Fprintf(&b, ":%d", m.line)
		}
		if m.pipeline != "" {
			fmt.Fprintf(&b, ": pipeline %q", m.pipeline)
		}
		b.WriteString(": " + m.msg + "\n")
	}
	return b.String()
}
