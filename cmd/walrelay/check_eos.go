package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// checkExactlyOnce checks what --exactly-once needs from Kafka: the broker
// initializes a transactional producer (with the transaction timeout).
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
	// N.B. the checkpoint topic (compacted, or missing and creatable) is
	// checked in every mode, by kafkastate.CheckTopic: the slot markers live there.
	return []replication.Check{txn}
}
