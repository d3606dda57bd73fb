package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestDomainEnumCitextColumns: an id column of a domain over a domain over
// uuid, an aggregate type (topic) column of an enum and a key column of
// citext are relayed as their base type, their label and their text: the
// keys, topics and ids as PostgreSQL renders them.
func TestDomainEnumCitextColumns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`CREATE EXTENSION IF NOT EXISTS citext;
		CREATE DOMAIN event_uuid AS uuid;
		CREATE DOMAIN event_id AS event_uuid NOT NULL;
		CREATE TYPE aggregate_kind AS ENUM ('%s', '%s');
		ALTER TABLE outbox ALTER COLUMN id TYPE event_id,
			ALTER COLUMN aggregatetype TYPE aggregate_kind USING aggregatetype::aggregate_kind,
			ALTER COLUMN aggregateid TYPE citext`, e.AggType(0), e.AggType(1)))
	relay := e.Start(t)
	relay.WaitStreaming()
	type row struct{ id, kind, key string }
	var rows []row
	for i, key := range []string{"Order-Ä1", "ORDER-ä1", "customer-42", "MiXeD Case"} {
		r := row{harness.NewUUID(), e.AggType(i), key}
		rows = append(rows, r)
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'T', '{}')`, strings.ToUpper(r.id), r.kind, r.key)
	}
	c := e.Collect(t)
	c.WaitFor(len(rows), 2*time.Minute)
	got := map[string]string{}
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		got[id] = r.Topic + " " + string(r.Key)
	}
	for _, r := range rows {
		// N.B. uuid's output is lower case, whatever the input's case.
		want := "outbox.event." + r.kind + " " + r.key
		if got[r.id] != want {
			t.Errorf("event %s: topic and key %q, want %q (records by id: %q)", r.id, got[r.id], want, got)
		}
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0; log:\n%s", code, relay.Log())
	}
}

// TestEnumKeyJSONSchema: with the json-schema converter, an enum key is
// written as Debezium writes it, a string named io.debezium.data.Enum whose
// "allowed" lists the labels in their order; a domain over jsonb payload
// has jsonb's schema.
func TestEnumKeyJSONSchema(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`CREATE TYPE aggregate_kind AS ENUM ('%s', '%s');
		CREATE DOMAIN document AS jsonb;
		ALTER TABLE outbox ALTER COLUMN aggregatetype TYPE aggregate_kind USING aggregatetype::aggregate_kind,
			ALTER COLUMN payload TYPE document`, e.AggType(0), e.AggType(1)))
	relay := e.Start(t, "--key-column", "aggregatetype", "--key-converter", "json-schema",
		"--value-converter", "json-schema", "--nullable-columns", "payload")
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'a-1', 'T', '{"n": 1}')`, harness.NewUUID(), e.AggType(1))
	c := e.Collect(t)
	c.WaitFor(1, 2*time.Minute)
	recs := c.ToEnd()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	wantKey := `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"` +
		e.AggType(0) + "," + e.AggType(1) + `"}},"payload":"` + e.AggType(1) + `"}`
	if got := string(recs[0].Key); got != wantKey {
		t.Errorf("key %s, want %s", got, wantKey)
	}
	wantValue := `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"n\": 1}"}`
	if got := string(recs[0].Value); got != wantValue {
		t.Errorf("value %s, want %s", got, wantValue)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0; log:\n%s", code, relay.Log())
	}
}
