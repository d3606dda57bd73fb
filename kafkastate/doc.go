// Package kafkastate is walrelay's durable state on its compacted topic
// (--checkpoint-topic): slot markers, exactly-once checkpoint records and
// parked aggregates (park.go, --on-poison=park); never read on the hot
// path.
//
// Input: a slot's identity and its last confirmed LSN (markers, marker.go);
// a Kafka transaction's last PostgreSQL transaction (checkpoints,
// checkpoint.go). Output: the last record of a key, read back to the
// topic's end offsets (markers) or last stable offsets (checkpoints).
// Invariant: a marker exists before walrelay confirms anything on the slot,
// and its LSN never passes a position the slot confirmed, so a slot with a
// marker that is missing was dropped or lost in a failover, never new; a
// checkpoint counts only once its Kafka transaction committed. The bytes
// of both records (keys, JSON values) are read by older and newer
// walrelays alike: they do not change.
package kafkastate
