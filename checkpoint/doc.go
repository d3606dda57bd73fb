// Package checkpoint tracks which transactions Kafka has fully acknowledged.
//
// Input: transactions registered in commit order (Begin), the number of
// records each one produced (Add, Close) and one Ack per acknowledged record.
// Output: the watermark, the end LSN of the newest transaction that, with
// every transaction before it, is fully acknowledged.
// Invariant: the watermark never decreases and never passes a transaction
// with an unacknowledged record.
package checkpoint
