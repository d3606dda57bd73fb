package kafkastate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The exactly-once checkpoint record (sink's Config.ExactlyOnce): one JSON
// record per slot (key eos/<system identifier>/<database>/<slot>) written
// inside each Kafka transaction, naming the end LSN of the last PostgreSQL
// transaction in it and the server's timeline.

// ErrExactlyOnceSetup is wrapped when Kafka cannot give exactly-once as
// configured (no transactions, a checkpoint topic that is not compacted, a
// timeout the broker refuses): a person must fix it.
var ErrExactlyOnceSetup = errors.New("exactly-once setup")

// Source names the slot a checkpoint belongs to.
type Source struct {
	Slot     string
	Database string
	// SystemID is the server's system identifier (IDENTIFY_SYSTEM).
	SystemID string
	// Timeline is the server's timeline (IDENTIFY_SYSTEM), written in each
	// checkpoint: its LSNs are positions in this timeline's history.
	Timeline int32
	// TimelineEnds holds, for each ancestor of Timeline, the LSN where it
	// ended in Timeline's history (its TIMELINE_HISTORY file); nil on
	// timeline 1.
	TimelineEnds map[int32]pglogrepl.LSN
}

// CheckpointKey is the checkpoint record key of src.
func CheckpointKey(src Source) string {
	return "eos/" + src.SystemID + "/" + src.Database + "/" + src.Slot
}

// Checkpoint is the value of a checkpoint record (JSON).
type Checkpoint struct {
	Slot             string `json:"slot"`
	Database         string `json:"database"`
	SystemIdentifier string `json:"system_identifier"`
	// EndLSN is the end LSN of the last PostgreSQL transaction of the
	// Kafka transaction: every transaction ending at or before it is in
	// Kafka.
	EndLSN string `json:"end_lsn"`
	// CommitLSN is that transaction's commit LSN.
	CommitLSN string `json:"commit_lsn"`
	// Timeline is the server's timeline when the checkpoint was written:
	// EndLSN is a position in its history. 0: written before walrelay
	// recorded it.
	Timeline        int32     `json:"timeline,omitempty"`
	TransactionalID string    `json:"transactional_id"`
	Transactions    int       `json:"transactions"` // PostgreSQL transactions with records in the Kafka transaction
	Records         int       `json:"records"`      // their records (dead letters included)
	WrittenAt       time.Time `json:"written_at"`
}

// CheckpointRecord is the record of checkpoint c of src on topic.
func CheckpointRecord(topic string, src Source, c Checkpoint) *kgo.Record {
	v, _ := json.Marshal(c)
	return &kgo.Record{Topic: topic, Key: []byte(CheckpointKey(src)), Value: v}
}

// checkpointReadTimeout bounds reading the checkpoint topic.
const checkpointReadTimeout = time.Minute

// ReadCheckpoint reads topic with a read_committed consumer up to each
// partition's last stable offset, once every transaction on it is decided
// (settledEnds, which tells wait what it waits for), and returns the end LSN
// of the last checkpoint record of src (0 and nil when there is none).
// opts connect a client (brokers, TLS, SASL).
//
// N.B. the caller has fenced the older producers of its transactional id
// first: their open transaction is decided then.
func ReadCheckpoint(ctx context.Context, adm *kadm.Client, opts []kgo.Opt, topic string, src Source, wait func(undecided string)) (pglogrepl.LSN, *Checkpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, checkpointReadTimeout)
	defer cancel()
	// N.B. the committed offsets are the last stable offsets: no record of
	// an open transaction lies below them; settled, no record committed
	// before now lies above them.
	var ends, starts kadm.ListedOffsets
	for try := 0; ; try++ {
		var err error
		if ends, err = settledEnds(ctx, adm, topic, wait); err == nil {
			starts, err = adm.ListStartOffsets(ctx, topic)
		}
		if err == nil {
			err = starts.Error()
		}
		if err == nil {
			break
		}
		// A topic just created may not be known to every broker yet.
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && !errors.Is(err, kerr.NotLeaderForPartition) || try >= 50 {
			return 0, nil, fmt.Errorf("list offsets of checkpoint topic %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("list offsets of checkpoint topic %s: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	from := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		start := int64(0)
		if so, ok := starts.Lookup(topic, o.Partition); ok {
			start = so.Offset
		}
		if o.Offset > start {
			from[o.Partition] = kgo.NewOffset().At(start)
			want[o.Partition] = o.Offset
		}
	})
	if len(from) == 0 {
		return 0, nil, nil
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		// N.B. read_committed: an aborted checkpoint never counts. Control
		// records are kept so that the position reaches the last stable
		// offset, which is a commit marker after a transaction.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint consumer: %w", err)
	}
	defer cl.Close()
	key := CheckpointKey(src)
	next := map[int32]int64{}
	var last *Checkpoint
	for {
		done := true
		for p, end := range want {
			done = done && next[p] >= end
		}
		if done {
			break
		}
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, nil, fmt.Errorf("read checkpoint topic %s up to its last stable offsets: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return 0, nil, fmt.Errorf("read checkpoint topic %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() || string(r.Key) != key {
				return
			}
			if r.Value == nil { // a tombstone deletes the checkpoint
				last = nil
				return
			}
			var c Checkpoint
			if err := json.Unmarshal(r.Value, &c); err != nil {
				lerr = fmt.Errorf("checkpoint record at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
				return
			}
			last = &c
		})
		if lerr != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrExactlyOnceSetup, lerr)
		}
	}
	if last == nil {
		return 0, nil, nil
	}
	if last.Slot != src.Slot || last.Database != src.Database || last.SystemIdentifier != src.SystemID {
		return 0, nil, fmt.Errorf("%w: checkpoint record %q names slot %q, database %q, system %s: it does not belong to this slot (delete it with a tombstone)",
			ErrExactlyOnceSetup, key, last.Slot, last.Database, last.SystemIdentifier)
	}
	lsn, err := pglogrepl.ParseLSN(last.EndLSN)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: checkpoint record %q: end_lsn: %w", ErrExactlyOnceSetup, key, err)
	}
	return lsn, last, nil
}
