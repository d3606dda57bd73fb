package connect

import (
	"bytes"
	"regexp"
	"testing"
)

// TestOTelPOMHasPOM: pom-otel.xml is pom.xml's classpath (every property
// and dependency of it) plus OpenTelemetry, at OTelVersion.
func TestOTelPOMHasPOM(t *testing.T) {
	for _, re := range []string{`(?s)<properties>.*?</properties>`, `(?s)<dependencies>\s*<!-- The Connect worker.*?</dependencies>`} {
		m := regexp.MustCompile(re).Find(POM)
		if m == nil {
			t.Fatalf("pom.xml has no %s", re)
		}
		body := bytes.TrimSuffix(bytes.TrimSuffix(m, []byte("</properties>")), []byte("</dependencies>"))
		if !bytes.Contains(OTelPOM, body) {
			t.Errorf("pom-otel.xml lacks pom.xml's %s", body)
		}
	}
	m := regexp.MustCompile(`<opentelemetry.version>([^<]+)</`).FindSubmatch(OTelPOM)
	if m == nil || string(m[1]) != OTelVersion {
		t.Errorf("pom-otel.xml <opentelemetry.version> is %q, the Go constant says %s", m, OTelVersion)
	}
	for _, a := range []string{"opentelemetry-api", "opentelemetry-context", "opentelemetry-sdk", "opentelemetry-sdk-extension-autoconfigure", "opentelemetry-exporter-otlp", "opentelemetry-exporter-logging"} {
		if !bytes.Contains(OTelPOM, []byte("<artifactId>"+a+"</artifactId>")) {
			t.Errorf("pom-otel.xml has no %s", a)
		}
	}
}
