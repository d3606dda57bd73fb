// Package checkpoint is the in-memory acknowledgement tracker (Tracker):
// it knows which transactions Kafka has fully acknowledged, and its
// watermark is the position the replication stream confirms. (The
// exactly-once checkpoint record on Kafka is kafkastate's, not this.)
//
// Input: transactions registered in commit order (Begin), the number of
// records each one produced (Add, Close) and one Ack per acknowledged record.
// Output: the watermark, the end LSN of the newest transaction that, with
// every transaction before it, is fully acknowledged.
// Invariant: the watermark never decreases and never passes a transaction
// with an unacknowledged record.
package checkpoint
