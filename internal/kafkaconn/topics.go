package kafkaconn

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Topic is a topic to create.
type Topic struct {
	Name string
	// Partitions and ReplicationFactor of the topic; -1: the broker's
	// default.
	Partitions        int32
	ReplicationFactor int16
	// Configs are the topic's configs (cleanup.policy=compact). Default
	// nil: the broker's.
	Configs map[string]*string
}

// Created is a topic CreateTopics created.
type Created struct {
	Name string
	// Existed: another creator made it first (TopicAlreadyExists). Its
	// leaders are waited for all the same.
	Existed bool
	// ReplicationFactor is the broker's answer (Kafka 2.4+).
	ReplicationFactor int16
}

// CreateError is a topic creation Kafka refused.
type CreateError struct {
	Topic string
	// Err is Kafka's error; Message the text it sent with it, if any.
	Err     error
	Message string
}

func (e *CreateError) Error() string {
	s := "create topic " + e.Topic + ": " + e.Err.Error()
	if e.Message != "" {
		s += "\n" + e.Message
	}
	return s
}

func (e *CreateError) Unwrap() error { return e.Err }

// CreateTopics creates topics, one request each, in order, and then waits,
// for at most wait, until every partition of each answers on its leader
// (AwaitLeaders); wait 0 skips the wait. It returns the topics created, also
// those before a failure, for the caller to log. A refused creation is a
// *CreateError; a topic that exists already is none (Created.Existed).
func CreateTopics(ctx context.Context, cl *kgo.Client, log *zap.Logger, wait time.Duration, topics ...Topic) ([]Created, error) {
	adm := kadm.NewClient(cl)
	created := make([]Created, 0, len(topics))
	for _, t := range topics {
		resp, err := adm.CreateTopic(ctx, t.Partitions, t.ReplicationFactor, t.Configs, t.Name)
		existed := errors.Is(err, kerr.TopicAlreadyExists)
		if err != nil && !existed {
			return created, &CreateError{Topic: t.Name, Err: err, Message: resp.ErrMessage}
		}
		created = append(created, Created{Name: t.Name, Existed: existed, ReplicationFactor: resp.ReplicationFactor})
	}
	if wait <= 0 || len(created) == 0 {
		return created, nil
	}
	names := make([]string, len(created))
	for i, c := range created {
		names[i] = c.Name
	}
	began := time.Now()
	tries, err := AwaitLeaders(ctx, cl, names, wait)
	if err == nil {
		log.Debug("created topics answer on every partition's leader", zap.Strings("topics", names),
			zap.Int("tries", tries), zap.Duration("waited", time.Since(began)))
	}
	return created, err
}
