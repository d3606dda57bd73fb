// Package metrics holds walrelay's Prometheus metrics.
//
// Input: counts and observations from every stage, and the functions the
// pipeline gives for the gauges read at each scrape (Gauges, ReadFrom).
// Output: one registry served at /metrics. Invariant: every metric name,
// help text and label is fixed here (and documented in docs/operate.md), none in
// the stages; a nil *Metrics accepts every call and records nothing, so
// stages can be tested without one.
package metrics
