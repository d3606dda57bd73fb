// Package inboxtest runs an inbox Handler against a real PostgreSQL and
// Kafka in a test, in a few lines: the records given are produced to a
// topic of their own, an inbox.Consumer applies them, and the test gets
// the counters and the dead letters back.
//
// Input: the brokers, a pgx pool on the database the Handler writes to,
// the Handler and the records (Event builds one with an id).
// Output: inbox.Stats and the dead-letter records, once every record was
// applied, skipped as a duplicate or dead-lettered.
// Invariant: each Run has a topic, a group and a dead-letter topic of its
// own (deleted at the test's end), so tests do not see one another's
// records; the inbox table is created if missing.
package inboxtest
