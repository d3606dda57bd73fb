package connect

import _ "embed"

// KafkaVersion is the Kafka Connect release the worker runs (see pom.xml for
// why it is not the broker's 4.4.0).
const KafkaVersion = "4.3.1"

// DebeziumVersion is the Debezium release of the connector and the router.
const DebeziumVersion = "3.6.1.Final"

// POM is pom.xml: `mvn -f pom.xml dependency:copy-dependencies
// -DincludeScope=runtime` copies the worker's and the connector's jars.
//
//go:embed pom.xml
var POM []byte

// Log4j2 is log4j2.properties. It writes to ${sys:connect.logs.dir}/connect.log.
//
//go:embed log4j2.properties
var Log4j2 []byte

// OTelPOM is pom-otel.xml: pom.xml's classpath plus OpenTelemetry's Java
// SDK (opentelemetry-bom OTelVersion), for make compat's tracing
// configuration only.
//
//go:embed pom-otel.xml
var OTelPOM []byte

// OTelVersion is the OpenTelemetry Java release of pom-otel.xml.
const OTelVersion = "1.68.0"
