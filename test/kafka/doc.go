// Package kafka carries the files the test bed needs to run a real Apache
// Kafka broker: pom.xml (the broker's jars, fetched from Maven Central by
// mvn) and log4j2.properties (the broker's logging).
// Input: nothing. Output: the embedded files and the Kafka version they name.
// Invariant: Version equals the kafka.version property of pom.xml.
package kafka
