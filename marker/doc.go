// Package marker keeps walrelay's record of the slots it has streamed from:
// one JSON record per slot (key marker/<system_identifier>/<database>/<slot>)
// on a compacted Kafka topic, written with acks from all in-sync replicas.
//
// Input: the slot's identity and its last confirmed LSN. Output: the last
// record of a slot read back to the topic's end offsets. Invariant: a record
// exists before walrelay confirms anything on the slot, and its LSN never
// passes a position the slot confirmed, so a slot with a record that is
// missing was dropped or lost in a failover, never new.
package marker
