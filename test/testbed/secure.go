package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// PGCertHost is the only name in the server certificate of a PostgreSQL
// started with PGSecurity, and the host of the bed's DSN. The certificate
// deliberately does not name 127.0.0.1, although the server listens there:
// a DSN with host 127.0.0.1 and sslmode=verify-full fails the host name check.
const PGCertHost = "localhost"

// PGSecurity makes a PostgreSQL the bed starts take TLS connections with
// SCRAM passwords and nothing else: ssl=on with a certificate for PGCertHost
// signed by CA, password_encryption=scram-sha-256, and a pg_hba.conf of the
// single line
//
//	hostssl all all 127.0.0.1/32 scram-sha-256
//
// (no trust, no local socket, no plaintext). The bed's DSN is then
// postgres://postgres:Password@localhost:PORT/postgres?sslmode=verify-full&sslrootcert=DIR/pg/ca.pem.
type PGSecurity struct {
	CA *CA
	// Password is the superuser postgres's password: letters, digits, '_',
	// '.' and '-'.
	Password string
	// OtherHost, when set, is an address of this machine other than
	// loopback (NonLoopbackAddr) that the server listens on too and its
	// certificate names too, with two more pg_hba.conf lines for it:
	// hostssl, and host (plaintext, SCRAM) for tests of what walrelay does
	// with sslmode=disable on a host that is not loopback.
	OtherHost string
}

// NonLoopbackAddr is an IPv4 address of one of this machine's interfaces
// other than loopback, for a server a test must reach over "the network".
func NonLoopbackAddr() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list interface addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("this machine has no IPv4 address other than loopback: the test needs one to reach a server over a network interface")
}

// KafkaSecurity gives a Kafka the bed starts a SASL_SSL listener besides the
// PLAINTEXT one (which stays, without authentication, for the controller,
// inter-broker traffic and the bed's helpers such as CreateTopic and
// ConsumeAll; a test hands the client under test SecureBrokers only). TLS
// uses a PEM key store with a certificate for 127.0.0.1 and localhost signed
// by CA; SASL offers PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, each for every
// user in Users (SCRAM credentials are written when the storage is
// formatted).
type KafkaSecurity struct {
	CA *CA
	// Users maps user names to passwords; both letters, digits, '_', '.'
	// and '-'.
	Users map[string]string
	// ClientCert makes the listener require a client certificate signed by
	// CA (ssl.client.auth=required) in addition to SASL.
	ClientCert bool
	// Authorizer turns Kafka's StandardAuthorizer on: the users of Users
	// may do only what ACLs allow them, except SuperUsers (names in Users)
	// and the PLAINTEXT listener's clients (kafkaacl.go).
	Authorizer bool
	SuperUsers []string
}

// safeSecret is what the bed writes into properties files, JAAS lines and
// the storage tool's --add-scram without quoting.
var safeSecret = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func (s *PGSecurity) writePasswordFile(pgDir string, u osUser) (string, error) {
	if s.CA == nil || !safeSecret.MatchString(s.Password) {
		return "", errors.New("PGSecurity needs a CA and a Password of letters, digits, '_', '.' and '-'")
	}
	path := filepath.Join(pgDir, "pwfile")
	if err := writeOwned(path, []byte(s.Password+"\n"), 0o600, u); err != nil {
		return "", err
	}
	return path, nil
}

// serverFiles writes the server's certificate, key and pg_hba.conf into the
// data directory and the CA certificate for clients into pgDir; it returns
// the postgres arguments that use them.
func (s *PGSecurity) serverFiles(pgDir, dataDir string, u osUser) ([]string, error) {
	hosts := []string{PGCertHost}
	if s.OtherHost != "" {
		hosts = append(hosts, s.OtherHost)
	}
	cert, key, err := s.CA.Issue("postgres", hosts...)
	if err != nil {
		return nil, err
	}
	hba := "# Written by walrelay's test bed: TLS and SCRAM passwords only.\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
	if s.OtherHost != "" {
		hba += fmt.Sprintf("hostssl all all %[1]s/32 scram-sha-256\nhost all all %[1]s/32 scram-sha-256\n", s.OtherHost)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"server.crt", cert}, {"server.key", key}, {"pg_hba.conf", []byte(hba)}} {
		// N.B. PostgreSQL refuses a key file readable by others.
		if err := writeOwned(filepath.Join(dataDir, f.name), f.data, 0o600, u); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(pgDir, "ca.pem"), s.CA.CertPEM, 0o644); err != nil {
		return nil, err
	}
	listen := "127.0.0.1"
	if s.OtherHost != "" {
		listen += "," + s.OtherHost
	}
	return []string{
		"-c", "listen_addresses=" + listen,
		"-c", "ssl=on",
		"-c", "ssl_cert_file=" + filepath.Join(dataDir, "server.crt"),
		"-c", "ssl_key_file=" + filepath.Join(dataDir, "server.key"),
		"-c", "password_encryption=scram-sha-256",
	}, nil
}

func (s *PGSecurity) url(pgDir string, port int) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", s.Password),
		Host:     PGCertHost + ":" + strconv.Itoa(port),
		Path:     "/postgres",
		RawQuery: url.Values{"sslmode": {"verify-full"}, "sslrootcert": {filepath.Join(pgDir, "ca.pem")}}.Encode(),
	}
	return u.String()
}

// writeOwned writes a file that u (the server's OS user) must own.
func writeOwned(path string, data []byte, perm os.FileMode, u osUser) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(path, perm); err != nil { // the file may have existed
		return err
	}
	return u.chown(path)
}

// brokerConfig writes the key store and trust store into kd and returns the
// server.properties lines of the SASL_SSL listener and the storage tool's
// --add-scram arguments.
func (s *KafkaSecurity) brokerConfig(kd string) (string, []string, error) {
	if s.CA == nil || len(s.Users) == 0 {
		return "", nil, errors.New("KafkaSecurity needs a CA and at least one user")
	}
	users := make([]string, 0, len(s.Users))
	for name, pw := range s.Users {
		if !safeSecret.MatchString(name) || !safeSecret.MatchString(pw) {
			return "", nil, fmt.Errorf("KafkaSecurity user %q: names and passwords are letters, digits, '_', '.' and '-'", name)
		}
		users = append(users, name)
	}
	slices.Sort(users)
	cert, key, err := s.CA.Issue("kafka", "127.0.0.1", "localhost")
	if err != nil {
		return "", nil, err
	}
	keyStore := filepath.Join(kd, "broker.pem")
	trustStore := filepath.Join(kd, "ca.pem")
	// N.B. a PEM key store is one file: the unencrypted PKCS #8 key, then
	// the certificate chain (no ssl.key.password, so no encryption expected).
	if err := os.WriteFile(keyStore, slices.Concat(key, cert, s.CA.CertPEM), 0o600); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(trustStore, s.CA.CertPEM, 0o644); err != nil {
		return "", nil, err
	}
	clientAuth := "none"
	if s.ClientCert {
		clientAuth = "required"
	}
	var plainUsers, scram []string
	for _, name := range users {
		plainUsers = append(plainUsers, fmt.Sprintf(`user_%s="%s"`, name, s.Users[name]))
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			scram = append(scram, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, name, s.Users[name]))
		}
	}
	// N.B. the listener-prefixed ssl.client.auth is the one a SASL_SSL
	// listener honours (KIP-684); every enabled mechanism needs a JAAS entry
	// on the listener, the SCRAM ones without options (the credentials are
	// in the cluster metadata).
	cfg := fmt.Sprintf(`
# SASL_SSL listener (KafkaSecurity).
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=%s
listener.name.sasl_ssl.ssl.truststore.type=PEM
listener.name.sasl_ssl.ssl.truststore.location=%s
listener.name.sasl_ssl.ssl.client.auth=%s
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required %s;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
`, keyStore, trustStore, clientAuth, strings.Join(plainUsers, " "))
	return cfg + s.authorizerConfig(), scram, nil
}

// StartForTest starts servers of the test's own, as Start does, and stops
// them (removing their directory) when the test ends; if the test failed, the
// last lines of their logs are logged first. It is for servers set up unlike
// the package's bed (PGSecurity, KafkaSecurity): no other test uses them, so
// they take no part in Main's and Disrupt's locks. Keep must be false.
func StartForTest(t testing.TB, opt Options) *Bed {
	t.Helper()
	if opt.Keep {
		t.Fatal("testbed.StartForTest: Keep must be false: the servers stop with the test")
	}
	if opt.Logf == nil {
		opt.Logf = t.Logf
	}
	b, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	b.logf = stderrf // t.Logf must not outlive the test
	t.Cleanup(func() {
		if t.Failed() {
			b.dumpLogs(t)
		}
		if err := b.Stop(); err != nil {
			t.Errorf("testbed: stop: %v", err)
		}
	})
	return b
}
