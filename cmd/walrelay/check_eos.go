package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// checkExactlyOnce checks what --exactly-once needs from Kafka: the broker
// initializes a transactional producer (with the transaction timeout), and
// the checkpoint topic is compacted or may be created.
func checkExactlyOnce(ctx context.Context, cfg config, sc sink.Config) []replication.Check {
	// N.B. a probe id of its own: initializing the relay's transactional
	// id would fence a walrelay running on it.
	probe := sc.TransactionalID + ".check"
	txn := replication.Check{Name: "Kafka transactions"}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(splitList(cfg.brokers)...),
		kgo.TransactionalID(probe), kgo.TransactionTimeout(sc.TransactionTimeout)}, sc.Opts...)...)
	if err != nil {
		txn.Err = err
		return []replication.Check{txn}
	}
	defer cl.Close()
	switch _, _, err := cl.ProducerID(ctx); {
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		txn.Err = fmt.Errorf("the broker refuses --kafka-transaction-timeout %s: lower it to at most the broker's transaction.max.timeout.ms (default 15m), or raise that", sc.TransactionTimeout)
	case err != nil:
		txn.Err = fmt.Errorf("init a transactional producer (probe transactional id %q): %w: --exactly-once needs Kafka 0.11+ with transactions, and WRITE and DESCRIBE on the transactional id %q", probe, err, sc.TransactionalID)
	default:
		txn.Note = fmt.Sprintf("the broker initialized a transactional producer (probe id %q, timeout %s); walrelay will use transactional id %q", probe, sc.TransactionTimeout, sc.TransactionalID)
	}
	return []replication.Check{txn, checkCheckpointTopic(ctx, cfg, kadm.NewClient(cl))}
}

// checkCheckpointTopic checks that the checkpoint topic is compacted, or
// missing and creatable.
func checkCheckpointTopic(ctx context.Context, cfg config, adm *kadm.Client) replication.Check {
	t := cfg.checkpointTopic
	c := replication.Check{Name: "checkpoint topic " + t}
	topics, err := adm.ListTopics(ctx, t)
	d, ok := topics[t]
	switch {
	case err != nil:
		c.Err = fmt.Errorf("list topics: %w", err)
		return c
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		if cfg.createTopics {
			c.Note = "missing: will be created at start with cleanup.policy=compact (--create-topics)"
		} else {
			c.Err = fmt.Errorf("topic %s does not exist and --create-topics is off: create it with cleanup.policy=compact", t)
		}
		return c
	case d.Err != nil:
		c.Err = d.Err
		return c
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, t)
	if err != nil {
		c.Err = fmt.Errorf("describe configs of topic %s: %w", t, err)
		return c
	}
	policy := "delete"
	for _, rc := range rcs {
		for _, kv := range rc.Configs {
			if kv.Key == "cleanup.policy" && kv.Value != nil {
				policy = *kv.Value
			}
		}
	}
	if !strings.Contains(policy, "compact") {
		c.Err = fmt.Errorf("cleanup.policy=%s: set it to compact (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact), or name another with --checkpoint-topic", policy, t)
		return c
	}
	c.Note = fmt.Sprintf("exists, compacted, %d partition(s)", len(d.Partitions))
	return c
}
