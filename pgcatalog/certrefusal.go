package pgcatalog

import (
	"crypto/x509"
	"errors"
)

// CertRefusal says whether err is PostgreSQL's TLS certificate failing
// verification when walrelay connected (sslmode=verify-ca or verify-full
// in connString), and what to fix, naming where connString connects
// (without its password).
//
// N.B. classified by the crypto/x509 error types, which pgconn wraps with
// %w; other TLS failures (a handshake cut, an old protocol) are not among
// them.
func CertRefusal(err error, connString string) (hint string, ok bool) {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	where := where(connString)
	switch {
	case errors.As(err, &unknownCA):
		return "PostgreSQL's TLS certificate is not signed by a CA walrelay trusts: set sslrootcert in --pg-url (WALRELAY_PG_URL, or the file of --pg-url-file) to the PEM file of the CA that signed it" + where, true
	case errors.As(err, &hostname):
		return "PostgreSQL's TLS certificate does not name the host in --pg-url (sslmode=verify-full checks it): connect by a name the certificate holds (WALRELAY_PG_URL, or the file of --pg-url-file)" + where, true
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "PostgreSQL's TLS certificate is expired or not yet valid: renew the server's certificate (ssl_cert_file), or fix this machine's clock" + where, true
	}
	return "", false
}
