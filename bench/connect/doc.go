// Package connect carries the files the benchmark and the compatibility
// check need to run Debezium next to walrelay: pom.xml (Kafka Connect and
// Debezium's PostgreSQL connector with the Outbox Event Router, fetched from
// Maven Central by mvn) and log4j2.properties (the worker's logging).
// Input: nothing. Output: the embedded files and the versions they name.
// Invariant: KafkaVersion and DebeziumVersion equal the pom's properties.
package connect
