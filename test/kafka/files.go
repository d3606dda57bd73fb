package kafka

import _ "embed"

// Version is the Apache Kafka release the test bed runs.
const Version = "4.4.0"

// POM is pom.xml: `mvn -f pom.xml dependency:copy-dependencies
// -DincludeScope=runtime` copies the broker's runtime jars.
//
//go:embed pom.xml
var POM []byte

// Log4j2 is log4j2.properties, the broker's logging configuration. It writes
// to ${sys:kafka.logs.dir}/server.log.
//
//go:embed log4j2.properties
var Log4j2 []byte
