package harness

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProducedBatch is one partition's record batch in a produce request: an
// idempotent producer's batch is known to the broker by producer id, epoch
// and first sequence number.
type ProducedBatch struct {
	Topic         string   // empty from v13 on, which names topics by TopicID
	TopicID       [16]byte // v13+
	Partition     int32
	ProducerID    int64
	ProducerEpoch int16
	FirstSequence int32
	Records       int32
}

// ParseProduceRequest returns the batches of a produce request as it passes
// the proxy (size, request header, body).
func ParseProduceRequest(msg []byte) ([]ProducedBatch, error) {
	if len(msg) < 14 || binary.BigEndian.Uint16(msg[4:]) != 0 {
		return nil, errors.New("parse produce request: not a produce request")
	}
	req := kmsg.ProduceRequest{Version: int16(binary.BigEndian.Uint16(msg[6:]))}
	// Header: api key, version, correlation id, nullable client id, then
	// tagged fields in a flexible version.
	body := msg[12:]
	if n := int16(binary.BigEndian.Uint16(body)); n > 0 {
		body = body[2+int(n):]
	} else {
		body = body[2:]
	}
	if req.IsFlexible() {
		b := kbinReader(body)
		if err := b.skipTags(); err != nil {
			return nil, fmt.Errorf("parse produce request: header tags: %w", err)
		}
		body = b
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("parse produce request: %w", err)
	}
	var out []ProducedBatch
	for _, tp := range req.Topics {
		for _, pp := range tp.Partitions {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(pp.Records); err != nil {
				return nil, fmt.Errorf("parse produce request: batch of %s/%d: %w", tp.Topic, pp.Partition, err)
			}
			out = append(out, ProducedBatch{Topic: tp.Topic, TopicID: tp.TopicID, Partition: pp.Partition,
				ProducerID: rb.ProducerID, ProducerEpoch: rb.ProducerEpoch, FirstSequence: rb.FirstSequence, Records: rb.NumRecords})
		}
	}
	return out, nil
}

type kbinReader []byte

func (b *kbinReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(*b)
	if n <= 0 {
		return 0, errors.New("bad uvarint")
	}
	*b = (*b)[n:]
	return v, nil
}

// skipTags skips a tagged-field section: a count, then tag, size, data.
func (b *kbinReader) skipTags() error {
	n, err := b.uvarint()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		if _, err := b.uvarint(); err != nil {
			return err
		}
		size, err := b.uvarint()
		if err != nil {
			return err
		}
		if uint64(len(*b)) < size {
			return errors.New("short tagged field")
		}
		*b = (*b)[size:]
	}
	return nil
}
