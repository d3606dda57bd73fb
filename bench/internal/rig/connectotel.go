package rig

import (
	"context"

	"github.com/walrelay/walrelay/bench/connect"
	"github.com/walrelay/walrelay/test/jvm"
)

// ConnectOTelJars returns the directory of ConnectJars' jars plus
// OpenTelemetry's Java SDK (bench/connect/pom-otel.xml), fetched with mvn
// into ${XDG_CACHE_HOME:-~/.cache}/walrelay/connect-V-debezium-V-otel-V
// the first time: a classpath of its own, so that ConnectJars' stays
// without OpenTelemetry.
func ConnectOTelJars(ctx context.Context, logf func(string, ...any)) (string, error) {
	return jvm.Jars{
		Name: "Kafka Connect " + connect.KafkaVersion + " and Debezium " + connect.DebeziumVersion + " with OpenTelemetry " + connect.OTelVersion,
		Dir:  "connect-" + connect.KafkaVersion + "-debezium-" + connect.DebeziumVersion + "-otel-" + connect.OTelVersion,
		POM:  connect.OTelPOM,
		Want: []string{
			"connect-runtime-" + connect.KafkaVersion + ".jar", "debezium-connector-postgres-" + connect.DebeziumVersion + ".jar",
			"opentelemetry-sdk-extension-autoconfigure-" + connect.OTelVersion + ".jar", "opentelemetry-exporter-logging-" + connect.OTelVersion + ".jar",
		},
	}.Fetch(ctx, logf)
}

// ConnectOTelProps are the system properties under which Debezium's
// router (TracingSpanUtil, GlobalOpenTelemetry) gets the SDK from
// ConnectOTelJars: autoconfigured (W3C traceparent and baggage
// propagators, sampler parentbased_always_on), its spans logged to the
// worker's stdout. N.B. not otel.traces.exporter=none: with every exporter
// none the autoconfigured OpenTelemetry starts no span, and the record's
// traceparent is the writer's, span id included (a make compat run).
var ConnectOTelProps = []string{
	"otel.java.global-autoconfigure.enabled=true",
	"otel.traces.exporter=logging", "otel.metrics.exporter=none", "otel.logs.exporter=none",
	"otel.service.name=kafka-connect",
}
