// Package metrics holds walrelay's Prometheus metrics.
//
// Input: counts and observations from every stage. Output: one registry
// served at /metrics. Invariant: metric names and labels are fixed here and
// documented in the README; a nil *Metrics accepts every call and records
// nothing, so stages can be tested without one.
package metrics
