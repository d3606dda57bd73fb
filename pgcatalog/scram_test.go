package pgcatalog

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"testing"
)

// TestSCRAMVerifierMatchesRFC7677: the verifier built for RFC 7677's
// example password and salt authenticates the RFC's exchange: its ServerKey
// gives the server signature the RFC shows, and its StoredKey is the hash of
// the client key the RFC's proof reveals.
func TestSCRAMVerifierMatchesRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	v, err := scramVerifierWithSalt("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^SCRAM-SHA-256\$4096:([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)$`).FindStringSubmatch(v)
	if m == nil || m[1] != "W22ZaJ0SNY7soEsUEjb6gQ==" {
		t.Fatalf("verifier %q is not SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey> with the salt", v)
	}
	storedKey, _ := base64.StdEncoding.DecodeString(m[2])
	serverKey, _ := base64.StdEncoding.DecodeString(m[3])
	const authMessage = "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	mac := func(key []byte) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(authMessage))
		return h.Sum(nil)
	}
	if got := base64.StdEncoding.EncodeToString(mac(serverKey)); got != "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Errorf("server signature %s, want RFC 7677's 6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", got)
	}
	proof, _ := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	sig := mac(storedKey)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	if sum := sha256.Sum256(clientKey); !bytes.Equal(sum[:], storedKey) {
		t.Errorf("StoredKey is not the hash of the client key RFC 7677's proof reveals")
	}
	// Two verifiers of one password differ (a fresh salt each).
	a, _ := ScramVerifier("pencil")
	b, _ := ScramVerifier("pencil")
	if a == b {
		t.Errorf("two verifiers of one password are equal: the salt is not random")
	}
}
