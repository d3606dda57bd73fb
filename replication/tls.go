package replication

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// HostTLS is how a connection string reaches one of its hosts: the
// effective sslmode, as pgx will connect, whatever spelt it (sslmode,
// PGSSLMODE, ssl=true, sslrootcert=system, sslnegotiation=direct).
type HostTLS struct {
	Host string // host name, address or socket directory
	Port uint16
	// Mode is the effective sslmode: disable, allow, prefer, require,
	// verify-ca or verify-full; "unix socket" for a socket directory (no
	// TLS, never on the network).
	Mode string
	// Loopback: a socket directory, "localhost", or a loopback address
	// (127.0.0.0/8, ::1). A host name is never resolved to decide it: a
	// DNS answer is not part of the configuration.
	Loopback bool
}

// Verified is true when the server's certificate and host name are checked.
func (h HostTLS) Verified() bool { return h.Mode == "verify-full" }

// Exposed is true when the connection crosses a network without a verified
// server: anything below verify-full on a host that is not loopback.
func (h HostTLS) Exposed() bool { return !h.Loopback && !h.Verified() }

func (h HostTLS) String() string {
	if h.Mode == "unix socket" {
		return h.Host
	}
	return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port)))
}

// risk says what an unverified mode leaves open.
func (h HostTLS) risk() string {
	switch h.Mode {
	case "disable":
		return "no TLS: queries, rows and the login travel in the clear"
	case "allow":
		return "plaintext first, TLS only if the server demands it, and then unverified"
	case "prefer":
		return "TLS without verifying the server's certificate, and plaintext if the server offers no TLS: anyone in the path can pose as the server"
	case "require":
		return "TLS without verifying the server's certificate: anyone in the path can pose as the server"
	case "verify-ca":
		return "TLS with the certificate checked against the CA but not the host name: any server with a certificate from that CA can pose as this one"
	}
	return "verified"
}

// ConnTLS reports, for each host of connString (pgx's fallbacks, in order),
// the effective TLS mode. It reads what pgx parsed, not the string, so that
// every way of setting it counts.
func ConnTLS(connString string) ([]HostTLS, error) {
	pc, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL connection string: %s", redactErr(err))
	}
	type attempt struct {
		host string
		port uint16
		tls  *tls.Config
	}
	attempts := []attempt{{pc.Host, pc.Port, pc.TLSConfig}}
	for _, f := range pc.Fallbacks {
		attempts = append(attempts, attempt{f.Host, f.Port, f.TLSConfig})
	}
	var out []HostTLS
	for i := 0; i < len(attempts); {
		a := attempts[i]
		h := HostTLS{Host: a.host, Port: a.port, Loopback: isLoopback(a.host)}
		// N.B. pgconn's configTLS gives each host one attempt, or two for
		// allow (plaintext, then TLS) and prefer (TLS, then plaintext);
		// unverified TLS has InsecureSkipVerify, verify-ca adds its own
		// chain check, verify-full neither.
		next := i + 1
		var second *attempt
		if next < len(attempts) && attempts[next].host == a.host && attempts[next].port == a.port && (attempts[next].tls == nil) != (a.tls == nil) {
			second = &attempts[next]
			next++
		}
		switch {
		case strings.HasPrefix(a.host, "/"):
			h.Mode = "unix socket"
		case second != nil && a.tls == nil:
			h.Mode = "allow"
		case second != nil:
			h.Mode = "prefer"
		case a.tls == nil:
			h.Mode = "disable"
		case a.tls.InsecureSkipVerify && a.tls.VerifyPeerCertificate == nil:
			h.Mode = "require"
		case a.tls.InsecureSkipVerify:
			h.Mode = "verify-ca"
		default:
			h.Mode = "verify-full"
		}
		out = append(out, h)
		i = next
	}
	return out, nil
}

func isLoopback(host string) bool {
	if strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TLSPolicy checks connString (named what, e.g. "--pg-url") against the
// rule that a non-loopback host is reached with sslmode=verify-full. With
// require a host that breaks it is an error (ErrSetup) that says how to fix
// it; without, a warning. Every SQL and replication connection walrelay
// opens from connString uses the same TLS settings, so one check covers
// them all.
func TLSPolicy(what, connString string, require bool) (hosts []HostTLS, warnings []string, err error) {
	hosts, err = ConnTLS(connString)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, h := range hosts {
		if !h.Exposed() {
			continue
		}
		msg := fmt.Sprintf("PostgreSQL host %s (%s) is reached with sslmode=%s: %s", h, what, h.Mode, h.risk())
		if require {
			errs = append(errs, setupErrorf("%s: add sslmode=verify-full and sslrootcert=<the file of the CA that signed the server's certificate> (or sslrootcert=system) to the connection string, or pass --pg-require-verified-tls=false to accept the risk", msg))
			continue
		}
		warnings = append(warnings, msg+" (accepted by --pg-require-verified-tls=false): use sslmode=verify-full with sslrootcert")
	}
	return hosts, warnings, errors.Join(errs...)
}

// DescribeTLS is a one-line summary of hosts for the start-up log and
// walrelay check, e.g. "db.example.com:5432 sslmode=verify-full".
func DescribeTLS(hosts []HostTLS) string {
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = fmt.Sprintf("%s sslmode=%s", h, h.Mode)
		if h.Loopback && !h.Verified() {
			parts[i] += " (loopback)"
		}
	}
	return strings.Join(parts, ", ")
}

// LiveTLS says whether an open connection runs over TLS, and its version
// ("TLS 1.3"), from the connection itself.
func LiveTLS(conn *pgconn.PgConn) (bool, string) {
	if tc, ok := conn.Conn().(*tls.Conn); ok {
		return true, tls.VersionName(tc.ConnectionState().Version)
	}
	return false, ""
}
