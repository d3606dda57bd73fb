package connect

import (
	"regexp"
	"testing"
)

func TestVersionsMatchPOM(t *testing.T) {
	for prop, want := range map[string]string{"kafka.version": KafkaVersion, "debezium.version": DebeziumVersion} {
		m := regexp.MustCompile(`<` + regexp.QuoteMeta(prop) + `>([^<]+)</`).FindSubmatch(POM)
		if m == nil {
			t.Errorf("pom.xml has no <%s>", prop)
			continue
		}
		if got := string(m[1]); got != want {
			t.Errorf("pom.xml <%s> is %s, the Go constant says %s", prop, got, want)
		}
	}
}
