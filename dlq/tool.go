package dlq

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkaconn"
	"github.com/walrelay/walrelay/kafkastate"
)

// Commands are dlq's sub-commands.
const Commands = "list, show, redrive, discard"

// Config says where the topics are and how to reach Kafka: walrelay run's
// settings, so that its command line and environment serve dlq as they
// are.
type Config struct {
	Brokers         []string
	Kafka           kafkaconn.Conn
	DeadLetterTopic string
	StateTopic      string // --checkpoint-topic
	// ExactlyOnce: redrive publishes inside Kafka transactions of
	// TransactionalID.
	ExactlyOnce     bool
	TransactionalID string
}

// Options are the sub-commands' own flags.
type Options struct {
	Aggregate string        // an aggregate's ID (list prints them)
	Topic     string        // with Key: the aggregate of this topic and key
	Key       string        //
	Event     string        // show: the dead letters of this event id
	Offset    string        // show, redrive: the dead letters at partition:offset, comma-separated
	Reason    string        // redrive: the dead letters of this walrelay.error.class
	OrigTopic string        // redrive: the dead letters whose walrelay.original.topic is this
	Full      bool          // show: values in full
	SkipBad   bool          // redrive: leave the events that hold no record in the dead-letter topic
	Wait      time.Duration // redrive, discard: how long to wait for the relay's answer
}

// Flags adds the sub-commands' flags to fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	fs.StringVar(&o.Aggregate, "aggregate", "", "dlq: the parked aggregate, by the ID walrelay dlq list prints")
	fs.StringVar(&o.Topic, "agg-topic", "", "dlq: the parked aggregate's topic (with --agg-key)")
	fs.StringVar(&o.Key, "agg-key", "", "dlq: the parked aggregate's key, as text (with --agg-topic)")
	fs.StringVar(&o.Event, "event", "", "dlq show: the dead letters of this event id")
	fs.StringVar(&o.Offset, "offset", "", "dlq show, redrive: the dead letters at partition:offset of the dead-letter topic, comma-separated")
	fs.StringVar(&o.Reason, "reason", "", "dlq redrive: the dead letters of this reason (walrelay.error.class, e.g. too_large)")
	fs.StringVar(&o.OrigTopic, "original-topic", "", "dlq redrive: the dead letters that were going to this topic")
	fs.BoolVar(&o.Full, "full", false, "dlq show: print values in full (default: their first 1000 bytes)")
	fs.BoolVar(&o.SkipBad, "skip-unpublishable", false, "dlq redrive: leave parked events that hold no record (a NULL column, an invalid value) in the dead-letter topic and re-publish the others; without it redrive refuses")
	fs.DurationVar(&o.Wait, "wait", 30*time.Second, "dlq redrive, discard: how long to wait for the running relay's answer to the release")
}

// Tool runs the sub-commands over one Kafka client.
type Tool struct {
	cfg Config
	o   Options
	cl  *kgo.Client
	out io.Writer
}

// opts connect a client to the brokers.
func (t *Tool) opts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(t.cfg.Brokers...), kgo.ClientID("walrelay-dlq")}, t.cfg.Kafka.Opts()...)
}

// errUsage is wrapped by a mistake in the command line: exit 2.
var errUsage = errors.New("usage")

// Run runs sub-command sub and returns the exit code: 0 done, 1 a runtime
// failure, 2 a mistake in the command line (printed with the fix).
func Run(sub string, cfg Config, o Options, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := &Tool{cfg: cfg, o: o, out: stdout}
	var run func(context.Context) error
	switch sub {
	case "list":
		run = t.list
	case "show":
		run = t.show
	case "redrive":
		run = t.redrive
	case "discard":
		run = t.discard
	default:
		fmt.Fprintf(stderr, "walrelay: dlq %q: name a sub-command: %s (walrelay dlq list -h lists the flags)\n", sub, Commands)
		return 2
	}
	cl, err := kgo.NewClient(t.opts()...)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: dlq: kafka client: %v\n", err)
		return 2
	}
	defer cl.Close()
	t.cl = cl
	if err := run(ctx); err != nil {
		fmt.Fprintf(stderr, "walrelay: dlq %s: %v\n", sub, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// aggregate resolves --aggregate or --agg-topic with --agg-key to one
// aggregate ID the view knows.
func (t *Tool) aggregate(v *View) (string, error) {
	if t.o.Aggregate != "" {
		if v.Parks.Get(t.o.Aggregate) == nil {
			return "", fmt.Errorf("%w: the state topic %s knows no aggregate %q (walrelay dlq list names them)", errUsage, t.cfg.StateTopic, t.o.Aggregate)
		}
		return t.o.Aggregate, nil
	}
	if t.o.Topic == "" || t.o.Key == "" {
		return "", fmt.Errorf("%w: name the aggregate: --aggregate ID, or --agg-topic and --agg-key", errUsage)
	}
	var found []string
	for id, p := range v.Parks.All() {
		a := p.Park
		if a == nil {
			a = &kafkastate.Park{Aggregate: p.Release.Aggregate}
		}
		if a.Topic == t.o.Topic && string(a.Key) == t.o.Key {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no aggregate of topic %q and key %q on the state topic %s (walrelay dlq list names them)", errUsage, t.o.Topic, t.o.Key, t.cfg.StateTopic)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%w: topic %q and key %q name an aggregate of several slots: pick one with --aggregate: %s", errUsage, t.o.Topic, t.o.Key, strings.Join(found, ", "))
}
