// Package fleet runs many pipelines in one process: `walrelay run
// --config FILE` (docs/fleet.md).
//
// Input: a YAML file of process-wide settings (HTTP, log, Kafka's brokers,
// TLS and SASL), defaults: and pipelines:, each setting named by its
// `walrelay run` flag and parsed by that flag's own value and validation.
// Output: one pipeline.Relay per pipeline, each with its own PostgreSQL
// connections and slot, run side by side, the at-least-once pipelines of
// equal Kafka settings producing through one shared client (kafka.go), all
// within the process's in-flight bound (budget.go); /readyz (and
// /readyz/NAME, one pipeline's), /metrics
// (every walrelay series labelled pipeline=NAME), /pipelines and the status
// page at / over all of them (the page a single walrelay's too); `walrelay
// status --config` prints a running fleet's /pipelines. With group: at the
// top, the replicas running the file share its pipelines through a Kafka
// consumer group (group.go, grouprun.go): each runs those assigned to it,
// stops a revoked one gracefully (slot released) before the rebalance goes
// on, a lost one (the group session failed) gracefully too, and a replica
// whose file differs from the group's is refused, exit
// 2; the slot stays the lock that lets one replica stream a pipeline.
// Invariant: one pipeline's failure never stops another: a permanent
// error stops that pipeline alone (logged with its name, shown by /readyz,
// /pipelines and walrelay_pipeline_stopped); the process exits on SIGTERM
// (0) or once every pipeline has stopped (the worst exit code). A file
// with any mistake runs nothing: every mistake is reported at once, with
// its line and pipeline, exit 2.
package fleet
