// Package rate tells whether events come fast enough for waiting on them to
// pay: walrelay batches a busy stream (a Kafka linger, a wait before
// reading the replication socket again) and lets a quiet one through at
// once.
//
// Input: the events, counted as they happen, with the time. Output: whether
// the last whole window or the current one held the events PerWait asks
// for.
// Invariant: a stream quiet for two windows reads as not busy. A Meter is
// not safe for concurrent use: one goroutine counts and asks.
package rate
