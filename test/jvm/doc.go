// Package jvm is the one starter of the Java programs the tests and the
// benchmarks run: the test bed's Kafka brokers and controllers
// (test/testbed, jars of test/kafka's pom.xml) and Kafka Connect with
// Debezium (bench/internal/rig, jars of bench/connect's pom.xml).
//
// Input: a pom.xml, the main class, JVM options, system properties and the
// program's arguments (its properties file). Output: the jars, fetched by
// mvn from Maven Central once into ${XDG_CACHE_HOME:-~/.cache}/walrelay/DIR;
// java's command line over them; the started JVM (a test/proc process).
// Invariant: a cached set of jars is used only when its marker holds the
// SHA-256 of the pom that fetched it (written last, under a lock), so an
// interrupted, concurrent or outdated download is redone, never half used.
package jvm
