// Package failover proves that walrelay loses nothing across a PostgreSQL
// failover: each test starts a primary and a standby of its own (a fixed
// version, 15 or 17, not the bed's) beside the bed's Kafka, promotes the
// standby and reads every record back. make test runs them once, make
// matrix on each bed as the other e2e packages.
package failover
