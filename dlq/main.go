package dlq

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pipeline"
)

// Main is `walrelay dlq <sub-command> [flags]`: it takes every flag of
// walrelay run and its WALRELAY_* variable, using the Kafka ones
// (--brokers, TLS, SASL, --dlq-topic, --checkpoint-topic, --exactly-once)
// and ignoring the others, so that run's command line and environment
// serve it as they are. It returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	var s pipeline.Settings
	var o Options
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	s.RegisterFlags(fs)
	o.Flags(fs)
	kit := cli.Kit{Program: "walrelay", EnvPrefix: "WALRELAY_"}
	if err := kit.Parse(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return 2
	}
	// N.B. the SASL password comes from the environment, never a flag.
	s.Kafka.Password = os.Getenv(kit.EnvName("kafka-sasl-password"))
	conn, _, err := s.Kafka.Resolve()
	brokers := cli.SplitList(s.Brokers)
	if err == nil && len(brokers) == 0 {
		err = errors.New("--brokers: name at least one broker")
	}
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: invalid configuration: %v\n", err)
		return 2
	}
	sc := s.Sink
	// N.B. not run's --transactional-id: redrive fencing the relay would
	// stop it.
	cfg := Config{Brokers: brokers, Kafka: conn, DeadLetterTopic: sc.DeadLetterTopic, StateTopic: sc.CheckpointTopic, ExactlyOnce: sc.ExactlyOnce}
	return Run(sub, cfg, o, stdout, stderr)
}
