package fleet

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrintStatus: walrelay status --config asks the address of the file
// (or of the command line) for /pipelines and prints a line per pipeline;
// exit 1 when one is not ready or the fleet does not answer, 2 when the
// file has a mistake or names no port.
func TestPrintStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pipelines" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`[{"name":"orders","state":"streaming","ready":true,"slot":"orders_slot","slot_lag_bytes":2048,"events_published":307,"events_per_second":36.21,"oldest_unacked_seconds":0,"owner":"r1","last_error":""},
{"name":"<b>x</b>","state":"restarting","ready":false,"slot":"billing_slot","slot_lag_bytes":0,"events_published":0,"events_per_second":0,"oldest_unacked_seconds":3,"last_error":"connect to postgresql:\nrefused"}]`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	write := func(name, addr string) string {
		path := filepath.Join(dir, name)
		file := "brokers: localhost:9092\nhttp-addr: " + addr + "\ndefaults:\n  publication: outbox_pub\npipelines:\n  - name: orders\n    pg-url: postgres://localhost/orders\n    slot: orders_slot\n"
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name, addr string
		args       []string
		code       int
		out, err   string
	}{
		{name: "the file's address", addr: addr, code: 1,
			out: "PIPELINE  STATE       READY  SLOT          LAG     PUBLISHED  EVENTS/S  OLDEST_UNACKED  OWNER  LAST_ERROR\n" +
				"orders    streaming   true   orders_slot   2.0KiB  307        36.21     0s              r1     -\n" +
				"<b>x</b>  restarting  false  billing_slot  0B      0          0.00      3s              -      connect to postgresql: refused\n",
			err: "1 of 2 pipelines not ready"},
		{name: "the command line's address", addr: "127.0.0.1:0", args: []string{"--http-addr", addr}, code: 1, err: "1 of 2 pipelines not ready"},
		{name: "port 0", addr: "127.0.0.1:0", code: 2, err: `http-addr "127.0.0.1:0" of `},
		{name: "nothing there", addr: "127.0.0.1:1", code: 1, err: "walrelay status: ask the fleet: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, _ := testPipeline()
			if err := top.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var out, errs strings.Builder
			code := PrintStatus(write(strings.ReplaceAll(tc.name, " ", "_")+".yaml", tc.addr), top, testPipeline, &out, &errs)
			if code != tc.code || !strings.Contains(errs.String(), tc.err) || tc.out != "" && out.String() != tc.out {
				t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit %d, stdout:\n%s\nstderr with %q", code, out.String(), errs.String(), tc.code, tc.out, tc.err)
			}
		})
	}
	var errs strings.Builder
	top, _ := testPipeline()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("http-addr: "+addr+"\npipelines:\n  - name: orders\n    slot: s\n    publicaton: p\n"), 0o600)
	if code := PrintStatus(bad, top, testPipeline, &strings.Builder{}, &errs); code != 2 || !strings.Contains(errs.String(), "bad.yaml:5: pipeline \"orders\": publicaton: no such setting") {
		t.Errorf("a file with a mistake: exit %d, %s; want 2 and the mistake with its line", code, errs.String())
	}
}
