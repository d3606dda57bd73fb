package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// aclServers are a PostgreSQL and a Kafka whose SASL_SSL listener has
// StandardAuthorizer on, started for TestKafkaACLRefusals alone: user is
// walrelay's principal, with the ACLs each case grants; admin is a super
// user.
type aclServers struct {
	bed            *testbed.Bed
	adm            *kadm.Client // over PLAINTEXT, whose principal is a super user
	caFile         string
	user, password string
	adminOpts      []kgo.Opt
}

func startACLServers(t *testing.T) *aclServers {
	t.Helper()
	ca, err := testbed.NewCA("walrelay ACL test CA")
	if err != nil {
		t.Fatal(err)
	}
	s := &aclServers{
		caFile:   e2etest.WriteFile(t, t.TempDir(), "ca.pem", ca.CertPEM),
		user:     "walrelay",
		password: "acl-pw-" + harness.Uniq(),
	}
	adminPW := "admin-pw-" + harness.Uniq()
	s.bed = testbed.StartForTest(t, testbed.Options{
		PG: true, Kafka: true, KafkaHeapMB: 512,
		KafkaSecurity: &testbed.KafkaSecurity{CA: ca, Authorizer: true, SuperUsers: []string{"admin"},
			Users: map[string]string{s.user: s.password, "admin": adminPW}},
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	s.adminOpts = []kgo.Opt{kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}),
		kgo.SASL(scram.Auth{User: "admin", Pass: adminPW}.AsSha512Mechanism())}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s.adm = kadm.NewClient(cl)
	return s
}

// acls applies (grant) or deletes (revoke) b for walrelay's principal.
func (s *aclServers) acls(t *testing.T, grant bool, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b = b.Allow("User:" + s.user).AllowHosts()
	if grant {
		res, err := s.adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("create ACLs: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL %s %s on %v %s: %v", r.Operation, r.Principal, r.Type, r.Name, r.Err)
			}
		}
		return
	}
	res, err := s.adm.DeleteACLs(ctx, b)
	if err != nil {
		t.Fatalf("delete ACLs: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("delete ACLs: %v", r.Err)
		}
	}
}

// base is what walrelay needs besides WRITE: to see and create topics, read
// their limits and read its checkpoint topic.
func (s *aclServers) base(t *testing.T) {
	s.acls(t, true, kadm.NewACLs().Topics("*").Operations(kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpCreate, kadm.OpRead))
	s.acls(t, true, kadm.NewACLs().Clusters().Operations(kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpCreate))
}

// stateWrite is WRITE on walrelay's own topics (checkpoints and dead
// letters), which lets it init an idempotent producer too.
func (s *aclServers) stateWrite() *kadm.ACLBuilder {
	return kadm.NewACLs().Topics("walrelay.checkpoints", "walrelay.dlq").Operations(kadm.OpWrite)
}

// outboxWrite is WRITE on every outbox topic.
func (s *aclServers) outboxWrite() *kadm.ACLBuilder {
	return kadm.NewACLs().Topics("outbox.event.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite)
}

func (s *aclServers) newEnv(t *testing.T) *env {
	e := &env{Env: harness.NewEnvOn(t, s.bed, relayBin), Brokers: s.bed.SecureBrokers(), KafkaOpts: s.adminOpts}
	// N.B. the publication before the slot: pgoutput reads publications
	// with the snapshot of the change it decodes, and a row committed
	// before the publication existed ends the walsender with "publication
	// does not exist".
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE outbox WITH (publish = 'insert', publish_via_partition_root = true)`, e.Pub))
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput')`, e.Slot))
	return e
}

func (s *aclServers) args() []string {
	return []string{"--kafka-tls-ca-file", s.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", s.user}
}

func (s *aclServers) environ() []string {
	return []string{"WALRELAY_KAFKA_SASL_PASSWORD=" + s.password}
}

// TestKafkaACLRefusals: an operation Kafka's authorizer refuses never heals
// by retrying: walrelay exits 2 naming the ACL to grant, whether it meets
// the refusal before it relayed anything or after (an ACL revoked while it
// runs), and confirms nothing past the events Kafka refused.
func TestKafkaACLRefusals(t *testing.T) {
	s := startACLServers(t)
	insert := func(e *env, n int) pglogrepl.LSN {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', jsonb_build_object('n', $3::int))`, harness.NewUUID(), e.AggType(0), n)
		return e.Bed.CurrentWALLSN(t, e.DSN)
	}

	t.Run("WRITE revoked on the outbox topics while relaying", func(t *testing.T) {
		e := s.newEnv(t)
		s.base(t)
		s.acls(t, true, s.stateWrite())
		s.acls(t, true, s.outboxWrite())
		relay := e.StartEnv(t, s.environ(), s.args()...)
		relay.WaitStreaming()
		c := e.Collect(t)
		after1 := insert(e, 1)
		c.WaitFor(1, time.Minute)
		harness.WaitFor(t, time.Minute, "the slot to be confirmed past the first row", func() bool {
			return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after1
		})
		s.acls(t, false, s.outboxWrite())
		before2 := e.Bed.CurrentWALLSN(t, e.DSN)
		insert(e, 2)
		code := relay.Wait(2 * time.Minute)
		out := relay.Log()
		const hint = "Kafka's authorizer refused walrelay an operation on a topic (TOPIC_AUTHORIZATION_FAILED): grant walrelay's principal"
		if code != 2 || !strings.Contains(out, hint) {
			t.Errorf("walrelay: exit %d, want 2 with %q:\n%s", code, hint, logTail(out))
		}
		if got := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN; got > before2 {
			t.Errorf("slot confirmed at %s, past %s, before the row Kafka refused", got, before2)
		}
		// Granted again, the row refused arrives.
		s.acls(t, true, s.outboxWrite())
		relay = e.StartEnv(t, s.environ(), s.args()...)
		c.WaitFor(2, time.Minute)
		relay.Stop(time.Minute)
	})

	t.Run("no WRITE on any topic: no idempotent producer", func(t *testing.T) {
		s.base(t)
		s.acls(t, false, s.stateWrite())
		s.acls(t, false, s.outboxWrite())
		e := s.newEnv(t)
		before := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
		insert(e, 1)
		code, out := e2etest.RunFor(t, 2*time.Minute, s.environ(), append(e.RunArgs([]string{"--pg-url", e.DSN}, e.KafkaBrokers()), s.args()...)...)
		const hint = "needs IDEMPOTENT_WRITE on the cluster, which WRITE on any topic implies"
		if code != 2 || !strings.Contains(out, "CLUSTER_AUTHORIZATION_FAILED") || !strings.Contains(out, hint) {
			t.Errorf("walrelay: exit %d, want 2 with CLUSTER_AUTHORIZATION_FAILED and %q:\n%s", code, hint, logTail(out))
		}
		if got := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN; got != before {
			t.Errorf("slot confirmed at %s, want %s where it was created", got, before)
		}
	})

	t.Run("exactly-once without WRITE on the transactional id", func(t *testing.T) {
		s.base(t)
		s.acls(t, true, s.stateWrite())
		s.acls(t, true, s.outboxWrite())
		e := s.newEnv(t)
		before := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
		insert(e, 1)
		args := append(append(e.RunArgs([]string{"--pg-url", e.DSN}, e.KafkaBrokers()), s.args()...), "--exactly-once")
		code, out := e2etest.RunFor(t, 2*time.Minute, s.environ(), args...)
		const hint = "grant WRITE and DESCRIBE on the transactional id"
		if code != 2 || !strings.Contains(out, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") || !strings.Contains(out, hint) {
			t.Errorf("walrelay --exactly-once: exit %d, want 2 with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and %q:\n%s", code, hint, logTail(out))
		}
		if got := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN; got != before {
			t.Errorf("slot confirmed at %s, want %s where it was created", got, before)
		}
	})
}

// logTail is the last 3000 bytes of a log.
func logTail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
