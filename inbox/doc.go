// Package inbox is the consumer half of the outbox pattern for Go: a
// franz-go consumer group member that applies each Kafka record walrelay
// produced exactly once to a PostgreSQL database (pgx), by recording the
// record's message id (walrelay's "id" header) in a processed-messages
// table in the same transaction as the record's effect.
//
// Each assigned partition is handled by a goroutine of its own, its records
// in offset order; partitions do not wait for one another. A BatchHandler
// applies a partition's records at hand in one transaction with their ids
// (a failed batch is handled record by record). The Consumer logs to any
// Logger (a *slog.Logger as it is, zap through ZapLogger).
//
// Input: records of the consumed topics, a pgx pool and the user's Handler.
// Output: the Handler's effects committed in PostgreSQL, one row per
// handled message id in the inbox table (DDL), consumer group offsets, and
// records that cannot be handled on the dead-letter topic (with
// walrelay's dead-letter header names).
// Invariant: a record's effect is committed at most once per consumer
// group (the id insert and the effect share one transaction; a redelivered
// id conflicts and skips the Handler), and an offset is committed only
// after the database transactions of that record and of every record
// before it in its partition committed (or it was dead-lettered: not
// marked processed, so that its replay applies it), so a crash or a
// rebalance at any point loses nothing and applies nothing twice.
package inbox
