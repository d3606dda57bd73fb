package sink

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
)

// startParking reads the slot's parked aggregates from the state topic
// before the first event is admitted, once every transaction on the topic
// is decided (with --exactly-once after the fencing, which decides the
// producer's own), and follows the topic for release records (walrelay
// dlq) while the sink lives.
func (s *Sink) startParking(ctx context.Context) error {
	if err := s.ensureCheckpointTopic(ctx); err != nil {
		return err
	}
	src := s.deps.Source
	p := &parkSet{}
	p.state.Prefix = kafkastate.ParkSlotPrefix(src.SystemID, src.Database, src.Slot)
	from, err := kafkastate.ReadParks(ctx, s.baseOpts(), s.cfg.CheckpointTopic, &p.state, s.waitUndecided)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.recount()
	p.mu.Unlock()
	s.parks = p
	s.reportParks()
	s.log.Info("parked aggregates read from the state topic", zap.String("topic", s.cfg.CheckpointTopic), zap.Int32("parked", p.n.Load()))
	go s.followParks(from)
	return nil
}

// followParks applies the release records of the state topic from the
// offsets from until the sink closes. N.B. only releases: the park
// records are the sink's own, and one read back may be older than what
// it has parked since.
func (s *Sink) followParks(from map[int32]kgo.Offset) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.closing
		cancel()
	}()
	acks, err := kgo.NewClient(append(s.baseOpts(), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		s.log.Warn("client for the answers to release records", zap.Error(err))
		return
	}
	defer acks.Close()
	for {
		err := kafkastate.FollowParks(ctx, s.baseOpts(), s.cfg.CheckpointTopic, from, func(r *kgo.Record) {
			from[r.Partition] = kgo.NewOffset().At(r.Offset + 1)
			if !strings.HasPrefix(string(r.Key), kafkastate.ReleasePrefix) {
				return
			}
			p := s.parks
			p.mu.Lock()
			id, err := p.state.Apply(r)
			var ack *kafkastate.Ack
			if a := p.state.Get(id); err == nil && a != nil && a.Release != nil {
				ack = &kafkastate.Ack{Aggregate: a.Release.Aggregate, Released: a.Release.Through, Parked: a.IsParked(), At: time.Now()}
				if a.Park != nil {
					ack.ParkedThrough = a.Park.Through
				}
			}
			p.recount()
			p.mu.Unlock()
			parked := ack != nil && ack.Parked
			if ack != nil {
				// N.B. the answer walrelay dlq redrive waits for: whether
				// events parked after the release keep the aggregate
				// parked. Written by its own client, outside any Kafka
				// transaction (the sink's may be open).
				acks.Produce(ctx, kafkastate.AckRecord(s.cfg.CheckpointTopic, *ack), func(_ *kgo.Record, err error) {
					if err != nil {
						s.log.Warn("write the answer to a release record", zap.String("aggregate", id), zap.Error(err))
					}
				})
			}
			switch {
			case err != nil:
				s.log.Warn("unreadable release record on the state topic: ignored", zap.Error(err))
			case id == "":
			case parked:
				// N.B. events parked after the position the release names
				// keep the aggregate parked: redrive goes on with them.
				s.log.Info("release record covers only part of the parked events: the aggregate stays parked", zap.String("aggregate", id))
			default:
				s.log.Info("aggregate released: its events flow again", zap.String("aggregate", id))
			}
			s.reportParks()
		})
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("follow the state topic for released aggregates: again in 1s", zap.String("topic", s.cfg.CheckpointTopic), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// reportParks sets the parked metrics.
func (s *Sink) reportParks() {
	p := s.parks
	if p == nil {
		return
	}
	var aggs, events int
	var oldest time.Time
	p.mu.Lock()
	for _, a := range p.state.All() {
		if !a.IsParked() {
			continue
		}
		aggs++
		events += a.Park.Events
		if oldest.IsZero() || a.Park.ParkedAt.Before(oldest) {
			oldest = a.Park.ParkedAt
		}
	}
	p.mu.Unlock()
	s.metrics.Parked(aggs, events, oldest)
}
