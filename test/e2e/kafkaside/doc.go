// Package kafkaside proves end to end what happens on walrelay's Kafka
// side: topic limits and creation, delivery and transaction timeouts, the
// in-flight budget, the HTTP server, metrics, the partitioner and
// configuration mistakes. Input: the real walrelay binary between the test
// bed's PostgreSQL and Kafka; output: what a real consumer reads back. None
// depends on the PostgreSQL version, so make test runs them on the bed's
// version only; make matrix runs them on each.
package kafkaside
