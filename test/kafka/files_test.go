package kafka

import (
	"bytes"
	"testing"
)

func TestPOMNamesVersion(t *testing.T) {
	want := []byte("<kafka.version>" + Version + "</kafka.version>")
	if !bytes.Contains(POM, want) {
		t.Fatalf("pom.xml does not contain %s: keep Version and the pom in step", want)
	}
}

func TestPOMUsesSLF4J17Binding(t *testing.T) {
	// N.B. Kafka declares slf4j-api 1.7.x; log4j-slf4j2-impl would leave the
	// broker on SLF4J's no-op logger and its log file empty.
	if !bytes.Contains(POM, []byte("<artifactId>log4j-slf4j-impl</artifactId>")) {
		t.Fatal("pom.xml must depend on log4j-slf4j-impl (the SLF4J 1.7 binding)")
	}
	if bytes.Contains(POM, []byte("<artifactId>log4j-slf4j2-impl</artifactId>")) {
		t.Fatal("pom.xml depends on log4j-slf4j2-impl, which SLF4J 1.7 ignores")
	}
}

func TestLog4j2WritesServerLog(t *testing.T) {
	if !bytes.Contains(Log4j2, []byte("${sys:kafka.logs.dir}/server.log")) {
		t.Fatal("log4j2.properties must write to ${sys:kafka.logs.dir}/server.log")
	}
}
