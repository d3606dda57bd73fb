package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pipeline"
)

// markersWait bounds the shared marker store's start: Kafka answers and
// the topic is read, or the pipelines open their own stores as a single
// walrelay does (and each reports what is wrong, in its own time).
const markersWait = 10 * time.Second

// shareMarkers gives the pipelines whose marker settings are equal one
// marker store (pipeline.SharedMarkers): one Kafka client, one check of
// the topic and one read of every slot's marker, before any pipeline
// starts, instead of one of each per pipeline at its start, while the
// pipelines started first already stream and the others' round trips
// queue behind them. The delivery rules are the same: each pipeline's
// first answer about its marker is that read's (a read at most
// pipeline's snapshotFresh old), its marker is written and acknowledged
// before anything is confirmed on its slot. In a group (snapshot false)
// the store is shared without a read of the topic: a replica's pipelines
// start at each assignment, perhaps after another replica confirmed on
// their slots, and read their marker from Kafka then. A pipeline with the
// null sink (no Kafka), or with client options of tests, keeps its own. It
// returns the stores, for closeMarkers.
func shareMarkers(plans []plan, snapshot bool, log *zap.Logger) []*kafkastate.Store {
	byKey := map[string][]*pipeline.Config{}
	var keys []string
	for i := range plans {
		c := &plans[i].cfg
		key, ok := markersKey(*c)
		if !ok {
			continue
		}
		if byKey[key] == nil {
			keys = append(keys, key)
		}
		byKey[key] = append(byKey[key], c)
	}
	var stores []*kafkastate.Store
	for _, key := range keys {
		cs := byKey[key]
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), markersWait)
		st, sn, err := openMarkers(ctx, markersConfig(*cs[0]), snapshot, log)
		cancel()
		if err != nil {
			log.Warn("cannot share a marker store: each pipeline opens its own", zap.Int("pipelines", len(cs)), zap.Error(err))
			continue
		}
		stores = append(stores, st)
		for _, c := range cs {
			c.Markers = &pipeline.SharedMarkers{Store: st, Snapshot: sn}
		}
		fs := []zap.Field{zap.Int("pipelines", len(cs)), zap.Duration("took", time.Since(t0))}
		if sn != nil {
			fs = append(fs, zap.Int("markers", sn.Len()))
		}
		log.Info("marker store shared", fs...)
	}
	return stores
}

// openMarkers opens the store of mc and, with snapshot, reads its topic.
func openMarkers(ctx context.Context, mc kafkastate.Config, snapshot bool, log *zap.Logger) (*kafkastate.Store, *kafkastate.Snapshot, error) {
	st, err := kafkastate.Open(ctx, mc, log)
	if err != nil || !snapshot {
		return st, nil, err
	}
	sn, err := st.ReadAll(ctx)
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("read the slot markers: %w", err)
	}
	return st, sn, nil
}

// markersConfig is c's marker settings with pipeline.New's defaults.
func markersConfig(c pipeline.Config) kafkastate.Config {
	mc := c.Marker
	if len(mc.Brokers) == 0 {
		mc.Brokers, mc.Kafka = c.Sink.Brokers, c.Sink.Kafka
	}
	if mc.Topic == "" {
		mc.Topic = kafkastate.DefaultTopic
	}
	return mc
}

// markersKey says which pipelines may share a marker store: equal
// brokers, topic and topic settings (the Kafka security settings are the
// process's).
func markersKey(c pipeline.Config) (string, bool) {
	mc := markersConfig(c)
	if c.NullSink || len(mc.Opts) > 0 || len(mc.Brokers) == 0 {
		return "", false
	}
	return fmt.Sprintf("brokers=%s topic=%s create=%t rf=%d version=%s", strings.Join(mc.Brokers, ","), mc.Topic, mc.CreateTopic, mc.ReplicationFactor, mc.Version), true
}

// closeMarkers closes the shared stores once every pipeline has stopped.
func closeMarkers(stores []*kafkastate.Store) {
	for _, s := range stores {
		s.Close()
	}
}
