package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestEmitCarriesTraceContext: walrelay setup --source messages creates
// walrelay.emit(aggregatetype, aggregateid, type, payload, traceparent)
// beside the four-argument one; a writer's context given to it (a bare W3C
// traceparent, or Debezium's Properties text) reaches the record's
// traceparent header as given (walrelay exports no spans here), while an
// event emitted with NULL or by the four-argument function gets none.
// walrelay check finds both functions as setup made them.
func TestEmitCarriesTraceContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if out, code := e2etest.RunCmd(t, e, "setup", "--source", "messages", "--role", ""); code != 0 {
		t.Fatalf("walrelay setup exit %d:\n%s", code, out)
	}
	var sigs string
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT string_agg(oid::regprocedure::text, ' ' ORDER BY pronargs) FROM pg_proc WHERE proname = 'emit' AND pronamespace = 'walrelay'::regnamespace`).Scan(&sigs); err != nil {
		t.Fatal(err)
	}
	if want := "walrelay.emit(text,text,text,jsonb) walrelay.emit(text,text,text,jsonb,text)"; sigs != want {
		t.Fatalf("setup created %s, want %s", sigs, want)
	}
	if out, code := e2etest.RunCmd(t, e, "check", "--source", "messages"); code != 0 || !strings.Contains(out, "walrelay.emit exists") {
		t.Errorf("walrelay check --source messages: exit %d, want 0 and walrelay.emit found:\n%s", code, out)
	}
	c := e.Collect(t)
	relay := e.Start(t, "--source", "messages")
	relay.WaitStreaming()

	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	agg := e.AggType(0)
	const (
		bare  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		props = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	emit := func(sql string, args ...any) string {
		t.Helper()
		var id string
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.QueryRow(ctx, sql, args...).Scan(&id) }); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return id
	}
	want := map[string]string{ // event id -> its record's traceparent ("" none)
		emit(`SELECT walrelay.emit($1, 'k-bare', 'OrderCreated', '{}'::jsonb, $2)::text`, agg, bare):                                                      bare,
		emit(`SELECT walrelay.emit($1, 'k-props', 'OrderCreated', '{}'::jsonb, $2)::text`, agg, "#Sun Dec 06 06:00:00 UTC 2026\ntraceparent="+props+"\n"): props,
		emit(`SELECT walrelay.emit($1, 'k-null', 'OrderCreated', '{}'::jsonb, NULL)::text`, agg):                                                          "",
		emit(`SELECT walrelay.emit($1, 'k-four', 'OrderCreated', '{}'::jsonb)::text`, agg):                                                                "",
	}
	recs := c.WaitFor(len(want), 2*time.Minute)
	seen := 0
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		w, ok := want[id]
		if !ok {
			t.Errorf("record of event %s, emitted by none of the calls", id)
			continue
		}
		seen++
		got, has := harness.Header(r, "traceparent")
		if got != w || has != (w != "") {
			t.Errorf("event %s (key %s): traceparent %q (present %v), want %q", id, r.Key, got, has, w)
		}
	}
	if seen != len(want) || len(recs) < len(want) {
		t.Errorf("read back %d records of the %d events", seen, len(want))
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
