package kafkastate

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Parked aggregates (sink's --on-poison=park): two keys per aggregate,
// each with one writer, so that compaction keeping the last record of a
// key never loses the other writer's news.
//
//	park/<system>/<database>/<slot>/<topic>/<key, base64url>     the relay: one record per parked event (Park)
//	release/<system>/<database>/<slot>/<topic>/<key, base64url>  walrelay dlq: redriven or discarded through a position (Release)
//
// The aggregate is parked while its Park's Through is after its
// Release's Through (Parked.IsParked): a release covers exactly the
// parked events up to the position it names, and an event parked after
// it keeps the aggregate parked.

// Pos is an event's commit position: its transaction's commit LSN and its
// index among the transaction's events. It orders events in commit order
// and names one event across restarts (a replayed event has the same).
type Pos struct {
	LSN   pglogrepl.LSN
	Index uint32
}

// String is "16/B374D848:3".
func (p Pos) String() string { return p.LSN.String() + ":" + strconv.FormatUint(uint64(p.Index), 10) }

// Compare is -1, 0 or 1 as p is before, at or after q.
func (p Pos) Compare(q Pos) int {
	switch {
	case p.LSN < q.LSN || p.LSN == q.LSN && p.Index < q.Index:
		return -1
	case p == q:
		return 0
	}
	return 1
}

// ParsePos parses Pos.String's form.
func ParsePos(s string) (Pos, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Pos{}, fmt.Errorf("parse position %q: want lsn:index", s)
	}
	lsn, err := pglogrepl.ParseLSN(s[:i])
	if err != nil {
		return Pos{}, fmt.Errorf("parse position %q: %w", s, err)
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return Pos{}, fmt.Errorf("parse position %q: %w", s, err)
	}
	return Pos{LSN: lsn, Index: uint32(n)}, nil
}

// MarshalText writes Pos.String.
func (p Pos) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads Pos.String's form.
func (p *Pos) UnmarshalText(b []byte) error {
	q, err := ParsePos(string(b))
	*p = q
	return err
}

// Aggregate names one aggregate of one slot: the topic its records go to
// and their key.
type Aggregate struct {
	SystemID string `json:"system_identifier"`
	Database string `json:"database"`
	Slot     string `json:"slot"`
	Topic    string `json:"topic"`
	Key      []byte `json:"key"` // JSON: base64
}

// ID is the aggregate's name on the state topic and in the
// walrelay.parked.aggregate header of its parked dead letters:
// <system>/<database>/<slot>/<topic>/<key, base64url>.
func (a Aggregate) ID() string {
	return a.SystemID + "/" + a.Database + "/" + a.Slot + "/" + a.Topic + "/" + base64.RawURLEncoding.EncodeToString(a.Key)
}

// Key prefixes of the two records of an aggregate.
const (
	ParkPrefix    = "park/"
	ReleasePrefix = "release/"
)

// Park is the relay's record of a parked aggregate, rewritten for each
// event it parks.
type Park struct {
	Aggregate
	// Start is the position of the event that parked the aggregate (the
	// episode's first); events before it are not parked.
	Start Pos `json:"start"`
	// Through is the newest parked event's position.
	Through Pos `json:"through"`
	// FirstEventID is the first event's id, which the parked dead letters
	// name in walrelay.parked.behind.
	FirstEventID string `json:"first_event_id"`
	// Reason is the first event's walrelay.error.class, Message its error.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Events is how many events this episode parked, each once (an event
	// relayed again after a restart, at or before Through, is not counted
	// again).
	Events    int       `json:"events"`
	ParkedAt  time.Time `json:"parked_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Release is walrelay dlq's record: the aggregate's parked events through
// Through were re-published (By "redrive") or given up (By "discard").
type Release struct {
	Aggregate
	Through Pos       `json:"through"`
	By      string    `json:"by"`
	Records int       `json:"records"` // re-published by this release
	At      time.Time `json:"at"`
}

// ParkRecord is the record of p on topic.
func ParkRecord(topic string, p Park) *kgo.Record {
	v, _ := json.Marshal(p)
	return &kgo.Record{Topic: topic, Key: []byte(ParkPrefix + p.ID()), Value: v}
}

// ReleaseRecord is the record of r on topic.
func ReleaseRecord(topic string, r Release) *kgo.Record {
	v, _ := json.Marshal(r)
	return &kgo.Record{Topic: topic, Key: []byte(ReleasePrefix + r.ID()), Value: v}
}

// Parked is what the state topic says of one aggregate.
type Parked struct {
	Park    *Park    // nil: only released
	Release *Release // nil: never released
}

// IsParked reports whether the aggregate is parked: an event was parked
// after the last release.
func (p *Parked) IsParked() bool {
	return p.Park != nil && (p.Release == nil || p.Release.Through.Compare(p.Park.Through) < 0)
}

// ParkState folds the park and release records of a state topic, by
// aggregate ID. The zero value is empty; Apply records in topic order.
type ParkState struct {
	// Prefix, if set, keeps only aggregates whose ID starts with it
	// (one slot's: ParkSlotPrefix).
	Prefix string
	m      map[string]*Parked
}

// ParkSlotPrefix is the ID prefix of one slot's aggregates.
func ParkSlotPrefix(system, database, slot string) string {
	return system + "/" + database + "/" + slot + "/"
}

// Apply folds record r in; it returns the ID of the aggregate it changed
// ("" for a record of another kind). A tombstone forgets its side.
func (st *ParkState) Apply(r *kgo.Record) (string, error) {
	k := string(r.Key)
	var id string
	var park bool
	switch {
	case strings.HasPrefix(k, ParkPrefix):
		id, park = k[len(ParkPrefix):], true
	case strings.HasPrefix(k, ReleasePrefix):
		id = k[len(ReleasePrefix):]
	default:
		return "", nil
	}
	if !strings.HasPrefix(id, st.Prefix) {
		return "", nil
	}
	if st.m == nil {
		st.m = make(map[string]*Parked)
	}
	p := st.m[id]
	if p == nil {
		p = &Parked{}
		st.m[id] = p
	}
	switch {
	case r.Value == nil && park:
		p.Park = nil
	case r.Value == nil:
		p.Release = nil
	case park:
		var v Park
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return "", fmt.Errorf("park record %q at %s/%d@%d: %w", k, r.Topic, r.Partition, r.Offset, err)
		}
		p.Park = &v
	default:
		var v Release
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return "", fmt.Errorf("release record %q at %s/%d@%d: %w", k, r.Topic, r.Partition, r.Offset, err)
		}
		p.Release = &v
	}
	if p.Park == nil && p.Release == nil {
		delete(st.m, id)
	}
	return id, nil
}

// Get returns the state of aggregate id, or nil.
func (st *ParkState) Get(id string) *Parked { return st.m[id] }

// All returns every aggregate the state knows, by ID.
func (st *ParkState) All() map[string]*Parked { return st.m }

// Agg is the aggregate of topic and key on src's slot.
func Agg(src Source, topic string, key []byte) Aggregate {
	return Aggregate{SystemID: src.SystemID, Database: src.Database, Slot: src.Slot, Topic: topic, Key: key}
}

// SetPark records p as aggregate id's park record, keeping its release.
func (st *ParkState) SetPark(id string, p *Park) {
	if st.m == nil {
		st.m = make(map[string]*Parked)
	}
	a := st.m[id]
	if a == nil {
		a = &Parked{}
		st.m[id] = a
	}
	a.Park = p
}

// AckPrefix is the key prefix of the relay's answer to a release (Ack).
const AckPrefix = "parkack/"

// Ack is the relay's answer to a Release, written once it applied it:
// Parked says whether the aggregate is still parked, because the relay
// parked events after Released (through ParkedThrough); walrelay dlq
// redrive then goes on with them.
type Ack struct {
	Aggregate
	Released      Pos       `json:"released"`
	ParkedThrough Pos       `json:"parked_through"`
	Parked        bool      `json:"parked"`
	At            time.Time `json:"at"`
}

// AckRecord is the record of a on topic.
func AckRecord(topic string, a Ack) *kgo.Record {
	v, _ := json.Marshal(a)
	return &kgo.Record{Topic: topic, Key: []byte(AckPrefix + a.ID()), Value: v}
}

// DecodeAck decodes r if it is an Ack record.
func DecodeAck(r *kgo.Record) (Ack, bool) {
	var a Ack
	if !strings.HasPrefix(string(r.Key), AckPrefix) || r.Value == nil || json.Unmarshal(r.Value, &a) != nil {
		return Ack{}, false
	}
	return a, true
}
