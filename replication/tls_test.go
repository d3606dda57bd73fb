package replication

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConnTLS: the effective sslmode is read from what pgx parsed, so each
// way of spelling it counts, per host of a multi-host string.
func TestConnTLS(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, selfSigned(t), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGSSLMODE", "")
	cases := []struct {
		name, dsn string
		env       string // PGSSLMODE
		want      []HostTLS
	}{
		{"no sslmode is prefer", "postgres://u@db.example.com/app", "", []HostTLS{{"db.example.com", 5432, "prefer", false}}},
		{"disable", "postgres://u@10.0.0.5:6432/app?sslmode=disable", "", []HostTLS{{"10.0.0.5", 6432, "disable", false}}},
		{"allow", "host=db.example.com sslmode=allow", "", []HostTLS{{"db.example.com", 5432, "allow", false}}},
		{"require", "postgres://u@db.example.com/app?sslmode=require", "", []HostTLS{{"db.example.com", 5432, "require", false}}},
		{"ssl=true alias is require", "postgres://u@db.example.com/app?ssl=true", "", []HostTLS{{"db.example.com", 5432, "require", false}}},
		{"require with a root certificate is verify-ca", "postgres://u@db.example.com/app?sslmode=require&sslrootcert=" + ca, "", []HostTLS{{"db.example.com", 5432, "verify-ca", false}}},
		{"verify-ca", "postgres://u@db.example.com/app?sslmode=verify-ca&sslrootcert=" + ca, "", []HostTLS{{"db.example.com", 5432, "verify-ca", false}}},
		{"verify-full", "postgres://u@db.example.com/app?sslmode=verify-full&sslrootcert=" + ca, "", []HostTLS{{"db.example.com", 5432, "verify-full", false}}},
		{"sslrootcert=system is verify-full", "postgres://u@db.example.com/app?sslrootcert=system", "", []HostTLS{{"db.example.com", 5432, "verify-full", false}}},
		{"PGSSLMODE", "postgres://u@db.example.com/app", "disable", []HostTLS{{"db.example.com", 5432, "disable", false}}},
		{"loopback addresses and localhost", "postgres://u@127.0.0.2,[::1],localhost/app?sslmode=disable", "", []HostTLS{{"127.0.0.2", 5432, "disable", true}, {"::1", 5432, "disable", true}, {"localhost", 5432, "disable", true}}},
		{"socket", "host=/var/run/postgresql dbname=app", "", []HostTLS{{"/var/run/postgresql", 5432, "unix socket", true}}},
		{"hosts with prefer each", "postgres://u@a.example.com:5432,b.example.com:5433/app", "", []HostTLS{{"a.example.com", 5432, "prefer", false}, {"b.example.com", 5433, "prefer", false}}},
		{"a name that resolves to loopback is not loopback", "postgres://u@localhost.example.com/app?sslmode=disable", "", []HostTLS{{"localhost.example.com", 5432, "disable", false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PGSSLMODE", c.env)
			got, err := ConnTLS(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("ConnTLS = %+v, want %+v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("host %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestTLSPolicy: required, an exposed host is a setup error naming the fix
// and the opt-out; not required, a warning; loopback neither.
func TestTLSPolicy(t *testing.T) {
	const exposed = "postgres://u:secret-pw@db.example.com/app?sslmode=require"
	_, warnings, err := TLSPolicy("--pg-url", exposed, true)
	if !errors.Is(err, ErrSetup) || len(warnings) != 0 {
		t.Fatalf("required: err %v, warnings %q; want a setup error and no warning", err, warnings)
	}
	for _, want := range []string{"PostgreSQL host db.example.com:5432 (--pg-url) is reached with sslmode=require", "sslmode=verify-full", "--pg-require-verified-tls=false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "secret-pw") {
		t.Errorf("error shows the password: %v", err)
	}
	_, warnings, err = TLSPolicy("--pg-url", exposed, false)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "sslmode=require") {
		t.Errorf("not required: err %v, warnings %q; want one warning", err, warnings)
	}
	_, warnings, err = TLSPolicy("--pg-url", "postgres://u@127.0.0.1/app?sslmode=disable", true)
	if err != nil || len(warnings) != 0 {
		t.Errorf("loopback: err %v, warnings %q; want neither", err, warnings)
	}
}

// selfSigned is a PEM certificate, enough for pgx to build a pool.
func selfSigned(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "walrelay test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
