package pgcatalog

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"golang.org/x/text/secure/precis"
)

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// ScramVerifier is the SCRAM-SHA-256 secret PostgreSQL stores for password
// (RFC 5802 and 7677, in the format of libpq's pg_fe_scram_build_secret):
//
//	SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
//
// `CREATE ROLE ... PASSWORD '<verifier>'` stores it as it is, so the
// password itself never reaches the server, its log or pg_stat_activity.
func ScramVerifier(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("make salt: %w", err)
	}
	return scramVerifierWithSalt(password, salt, scramIterations)
}

func scramVerifierWithSalt(password string, salt []byte, iterations int) (string, error) {
	// N.B. normalized as pgx normalizes the password it logs in with
	// (SASLprep's successor, OpaqueString; the raw password when that
	// refuses it, as PostgreSQL does), so that walrelay's login matches.
	if p, err := precis.OpaqueString.String(password); err == nil {
		password = p
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("derive salted password: %w", err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(storedKey[:]), b64(serverKey)), nil
}
