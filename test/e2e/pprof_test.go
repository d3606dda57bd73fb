package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestPprofCmdlineHidesPGPassword: with --http-pprof, a --pg-url given on the
// command line with a password does not show on any profiling endpoint:
// /debug/pprof/cmdline is not served; the other endpoints are.
func TestPprofCmdlineHidesPGPassword(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	password := "pprof-pw-" + harness.Uniq() + harness.Uniq()
	// N.B. the bed's PostgreSQL trusts local logins: the password is
	// accepted and ignored, as a real one would be checked.
	e.DSN = e2etest.WithUser(t, e.DSN, "postgres", password)
	relay := e.Start(t, "--http-pprof") // --pg-url e.DSN
	served := regexp.MustCompile(`"msg":"serving [^"]*/debug/pprof/","addr":"([^"]+)"`)
	var addr string
	harness.WaitFor(t, 30*time.Second, "walrelay to serve /debug/pprof/", func() bool {
		if m := served.FindStringSubmatch(relay.Log()); m != nil {
			addr = m[1]
			return true
		}
		if relay.Exited() {
			t.Fatalf("walrelay exited before serving HTTP: %v", relay.Err())
		}
		return false
	})
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/cmdline?debug=1", "/debug/pprof/"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), password) {
			t.Errorf("GET %s (%d) shows --pg-url's password:\n%.500s", path, resp.StatusCode, body)
		}
		if strings.HasPrefix(path, "/debug/pprof/cmdline") && resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404: the command line holds --pg-url", path, resp.StatusCode)
		}
		if path == "/debug/pprof/" && resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200: the other profiling endpoints stay", path, resp.StatusCode)
		}
	}
	if strings.Contains(relay.Log(), password) {
		t.Errorf("walrelay's log shows --pg-url's password")
	}
}
