package kafkaside

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestKafkaSASLWithoutTLS: SASL PLAIN without TLS (the password in the
// clear) is refused at start (exit 2, with the fix) by the commands that use
// Kafka unless --kafka-allow-sasl-plain-without-tls; allowed, and SCRAM
// without TLS, are warned about in the JSON log (run) or as WARN lines
// (check); status and setup --print, which do not use Kafka, neither refuse
// nor warn.
func TestKafkaSASLWithoutTLS(t *testing.T) {
	t.Parallel()
	e := &env{Env: harness.NewEnv(t, relayBin)}
	e.PGURLFile = e2etest.WriteFile(t, t.TempDir(), "pg-url", []byte(e.DSN))
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput')`, e.Slot))
	t.Cleanup(func() { e.Bed.Exec(t, e.DSN, fmt.Sprintf(`SELECT pg_drop_replication_slot('%s')`, e.Slot)) })
	pwEnv := []string{"WALRELAY_KAFKA_SASL_PASSWORD=sasl-pw-never-shown"}
	sasl := func(mech string) []string {
		return []string{"--kafka-sasl-mechanism", mech, "--kafka-sasl-username", "walrelay"}
	}
	run := e.RunArgs([]string{"--pg-url", e.DSN}, e.KafkaBrokers())
	const fix = "--kafka-sasl-mechanism PLAIN without TLS sends the Kafka password in the clear: add --kafka-tls"

	t.Run("PLAIN without TLS refused", func(t *testing.T) {
		// N.B. status given --brokers reads the parked aggregates from
		// Kafka, so it refuses as check does.
		for _, args := range [][]string{append(run, sasl("PLAIN")...), append(e.CommandArgs("check"), sasl("PLAIN")...), append(e.CommandArgs("status"), sasl("PLAIN")...)} {
			code, out := e2etest.RunFor(t, 30*time.Second, pwEnv, args...)
			if code != 2 || !strings.Contains(out, fix) || !strings.Contains(out, "--kafka-allow-sasl-plain-without-tls") {
				t.Errorf("walrelay %s: exit %d, want 2 with %q and the opt-in:\n%s", args[0], code, fix, out)
			}
		}
	})
	t.Run("commands without Kafka neither refuse nor warn", func(t *testing.T) {
		for _, args := range [][]string{
			append([]string{"status", "--pg-url-file", e.PGURLFile, "--slot", e.Slot, "--publication", e.Pub}, sasl("PLAIN")...),
			append([]string{"setup", "--print"}, sasl("PLAIN")...),
		} {
			code, out := e2etest.RunOnce(t, pwEnv, args...)
			if code != 0 || strings.Contains(out, "SASL") {
				t.Errorf("walrelay %s: exit %d, want 0 without a word about SASL:\n%s", args[0], code, out)
			}
		}
	})
	warnings := []struct{ mech, args, want string }{
		{"PLAIN", "--kafka-allow-sasl-plain-without-tls", "Kafka SASL PLAIN without TLS: the password is sent in the clear (allowed by --kafka-allow-sasl-plain-without-tls); add --kafka-tls"},
		{"SCRAM-SHA-512", "", "Kafka SASL SCRAM-SHA-512 without TLS: the password is not sent, but records and the session are unprotected"},
	}
	for _, c := range warnings {
		t.Run(c.mech+" warned about", func(t *testing.T) {
			extra := sasl(c.mech)
			if c.args != "" {
				extra = append(extra, c.args)
			}
			relay := harness.StartProcess(t, relayBin, pwEnv, append(append([]string{}, run...), extra...))
			line := regexp.MustCompile(`(?m)^\{"level":"warn",.*"msg":"` + regexp.QuoteMeta(c.want))
			harness.WaitFor(t, time.Minute, "walrelay to log "+c.want, func() bool {
				return line.MatchString(relay.Log()) || relay.Exited()
			})
			log := relay.Log()
			if !line.MatchString(log) {
				t.Errorf("walrelay run's JSON log has no warn line %q:\n%.2000s", c.want, log)
			}
			for _, l := range strings.Split(log, "\n") {
				if strings.Contains(l, "SASL") && !strings.HasPrefix(l, "{") {
					t.Errorf("walrelay run wrote a line about SASL outside its JSON log: %s", l)
				}
			}
			relay.Kill()
			_, out := e2etest.RunOnce(t, pwEnv, append(e.CommandArgs("check"), extra...)...)
			if !strings.Contains(out, "WARN  reach Kafka: "+c.want) {
				t.Errorf("walrelay check: no line %q:\n%s", "WARN  reach Kafka: "+c.want, out)
			}
			if strings.Contains(out, "sasl-pw-never-shown") {
				t.Errorf("walrelay check shows the password:\n%s", out)
			}
		})
	}
}
