package pipeline

import (
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

// LogTLSWarnings logs, for the commands that run no Preflight (status,
// setup), the warnings about rc.ConnString (--pg-url) and standbyURL
// (--pg-standby-url, "": none) below verify-full on a host other than
// loopback, and returns the error when rc.RequireVerifiedTLS refuses one.
func LogTLSWarnings(rc replication.Config, standbyURL string, log *zap.Logger) error {
	urls := [][2]string{{"--pg-url", rc.ConnString}}
	if standbyURL != "" {
		urls = append(urls, [2]string{"--pg-standby-url", standbyURL})
	}
	for _, u := range urls {
		hosts, warnings, err := replication.TLSPolicy(u[0], u[1], rc.RequireVerifiedTLS)
		if err != nil {
			return err
		}
		for _, w := range warnings {
			log.Warn("postgresql connection not verified: "+w, zap.String("sslmode", hosts[0].Mode))
		}
	}
	return nil
}
