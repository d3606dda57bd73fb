package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/preflight"
)

// Probe is a check another stage runs on Preflight's Kafka client, such as
// the state store's checkpoint topic (marker.Preflight).
type Probe func(ctx context.Context, adm *kadm.Client) preflight.Check

// Preflight checks, without producing or creating anything, that a broker
// answers ("reach Kafka", always the first check and, when it fails, the
// only one), then runs probes, then checks that the dead-letter topic
// exists or may be created (OnPoison dead-letter).
func Preflight(ctx context.Context, cfg Config, probes ...Probe) []preflight.Check {
	cfg = cfg.withDefaults()
	brokers := strings.Join(cfg.Brokers, ",")
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.Kafka.Opts()...)...)
	if err != nil {
		return []preflight.Check{{Name: "reach Kafka", Err: err}}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return []preflight.Check{{Name: "reach Kafka", Err: fmt.Errorf("reach kafka at %s: %w: check --brokers and that the brokers' advertised listeners are reachable from here", brokers, err)}}
	}
	checks := []preflight.Check{{Name: "reach Kafka", Note: fmt.Sprintf("%d broker(s), cluster %s", len(meta.Brokers), meta.Cluster)}}
	for _, p := range probes {
		checks = append(checks, p(ctx, adm))
	}
	if cfg.OnPoison != OnPoisonDeadLetter && cfg.OnPoison != OnPoisonPark {
		return checks
	}
	topics, err := adm.ListTopics(ctx, cfg.DeadLetterTopic)
	c := preflight.Check{Name: "dead-letter topic " + cfg.DeadLetterTopic}
	switch d, ok := topics[cfg.DeadLetterTopic]; {
	case err != nil:
		c.Err = fmt.Errorf("list topics: %w", err)
	case ok && d.Err == nil:
		c.Note = fmt.Sprintf("exists, %d partitions", len(d.Partitions))
	case ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		c.Err = d.Err
	case cfg.CreateTopics:
		c.Note = "missing: will be created at start (--create-topics)"
	default:
		c.Err = fmt.Errorf("topic %s does not exist and --create-topics is off: create it", cfg.DeadLetterTopic)
	}
	return append(checks, c)
}

// PreflightExactlyOnce checks what ExactlyOnce needs from Kafka: the broker
// initializes a transactional producer (with the transaction timeout).
func PreflightExactlyOnce(ctx context.Context, cfg Config) []preflight.Check {
	cfg = cfg.withDefaults()
	// N.B. a probe id of its own: initializing the relay's transactional
	// id would fence a walrelay running on it.
	probe := cfg.TransactionalID + ".check"
	txn := preflight.Check{Name: "Kafka transactions"}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...),
		kgo.TransactionalID(probe), kgo.TransactionTimeout(cfg.TransactionTimeout)}, cfg.Kafka.Opts()...)...)
	if err != nil {
		txn.Err = err
		return []preflight.Check{txn}
	}
	defer cl.Close()
	switch _, _, err := cl.ProducerID(ctx); {
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		txn.Err = fmt.Errorf("the broker refuses --kafka-transaction-timeout %s: lower it to at most the broker's transaction.max.timeout.ms (default 15m), or raise that", cfg.TransactionTimeout)
	case err != nil:
		txn.Err = fmt.Errorf("init a transactional producer (probe transactional id %q): %w: --exactly-once needs Kafka 0.11+ with transactions, and WRITE and DESCRIBE on the transactional id %q", probe, err, cfg.TransactionalID)
	default:
		txn.Note = fmt.Sprintf("the broker initialized a transactional producer (probe id %q, timeout %s); walrelay will use transactional id %q", probe, cfg.TransactionTimeout, cfg.TransactionalID)
	}
	// N.B. the checkpoint topic (compacted, or missing and creatable) is
	// checked in every mode, by marker.CheckTopic: the slot markers live there.
	return []preflight.Check{txn}
}
