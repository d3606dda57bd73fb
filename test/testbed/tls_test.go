package testbed_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/walrelay/walrelay/test/testbed"
)

// TestCAIssue: a server certificate verifies for its hosts and no other,
// against its CA and no other; a client certificate is for client auth.
func TestCAIssue(t *testing.T) {
	t.Parallel()
	ca, err := testbed.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testbed.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue("server", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("certificate and key do not pair: %v", err)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Fatalf("key is not PKCS #8 PEM")
	}
	b, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := func(ca *testbed.CA) *x509.CertPool {
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(ca.CertPEM)
		return p
	}
	for _, c := range []struct {
		name string
		host string
		ca   *testbed.CA
		ok   bool
	}{
		{"IP address", "127.0.0.1", ca, true},
		{"DNS name", "localhost", ca, true},
		{"other name", "example.com", ca, false},
		{"other CA", "localhost", other, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := cert.Verify(x509.VerifyOptions{DNSName: c.host, Roots: pool(c.ca)})
			if (err == nil) != c.ok {
				t.Errorf("verify for %s: %v, want ok=%v", c.host, err, c.ok)
			}
		})
	}
	clientPEM, _, err := ca.Issue("client")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = pem.Decode(clientPEM)
	client, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool(ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
}
