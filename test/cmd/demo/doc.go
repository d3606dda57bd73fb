// Command demo shows walrelay end to end: it creates an outbox, runs the
// walrelay binary, writes sample orders (a business row and an outbox row
// per transaction, one transaction rolled back), and prints the Kafka
// records as a consumer reads them. Run it with `make demo`, which starts
// PostgreSQL and Kafka first (test/cmd/testbed).
//
// Input: WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS, the walrelay
// binary. Output: the records printed, exit 1 on any error. Invariant: it
// prints exactly the committed transactions' events, the rolled-back one's
// never, and walrelay exits 0 with its slot confirmed.
package main
