package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pipeline"
	"go.uber.org/zap"
)

// command is a parsed sub-command: its flags and the stages' configuration.
type command struct {
	cfg config
	// pc is the relay's configuration, the stages' effective values.
	pc pipeline.Config
	// invalid holds the configuration mistakes when parseCommand was asked
	// to tolerate them (setup --print needs no server).
	invalid error
	// warnings are about the environment (envWarnings), logged.
	warnings []string
	// log is the command's logger (--log-level, --log-format, on stderr):
	// where its warnings about security go.
	log *zap.Logger
}

// parseCommand parses the flags of sub-command name, with extra adding the
// command's own flags, and builds the stages' configuration. It returns an
// exit code >= 0 when the command must stop: help asked for (0) or a
// mistake (2, printed to stderr).
func parseCommand(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet), tolerate func() bool) (*command, int) {
	c := &command{warnings: envWarnings(), log: zap.NewNop()}
	c.cfg.NoKafka = name == "status"
	fs := newFlagSet(name, &c.cfg)
	if extra != nil {
		extra(fs)
	}
	// N.B. the warnings first when walrelay stops at a mistake: a
	// misspelt variable is often the mistake.
	printWarnings := func() {
		for _, w := range c.warnings {
			fmt.Fprintf(stderr, "walrelay: warning: %s\n", w)
		}
	}
	if err := kit.Parse(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		printWarnings()
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "walrelay: %s\n", line)
		}
		return nil, exitConfig
	}
	// N.B. status reads the parked aggregates when given Kafka settings.
	fs.Visit(func(f *flag.Flag) { c.cfg.NoKafka = c.cfg.NoKafka && f.Name != "brokers" && f.Name != "on-poison" })
	pc, err := c.cfg.stages()
	c.pc = pc
	if l, lerr := newLogger(c.cfg.logLevel, c.cfg.logFormat, stderr); lerr == nil {
		c.log = l
	}
	if err != nil && (tolerate == nil || !tolerate()) {
		printWarnings()
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", cli.Indent(err))
		return nil, exitConfig
	}
	c.invalid = err
	// N.B. run logs them once its logger has its final options.
	if name != "run" {
		for _, w := range c.warnings {
			c.log.Warn(w)
		}
	}
	return c, -1
}
