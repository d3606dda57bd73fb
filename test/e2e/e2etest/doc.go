// Package e2etest is what the end-to-end test packages (test/e2e and its
// kafkaside and failover packages) share: a test's Env, the walrelay
// process it starts (Proc), a real consumer reading the test's topics to
// their end offsets (Collector), and the record check. Input: the test bed
// and the walrelay binary Main builds; output: what Kafka and PostgreSQL
// hold, never walrelay's own account of it.
package e2etest
