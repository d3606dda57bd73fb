// Command otelcol is the OpenTelemetry Collector the test bed runs for the
// tracing tests: the OTLP receiver (gRPC and HTTP) and the file exporter,
// built from the Collector's Go modules at one release. In: spans over
// OTLP. Out: one JSON line per export batch in the file its configuration
// names. It is a module of its own, so walrelay's go.mod never takes the
// Collector's dependencies.
package main
